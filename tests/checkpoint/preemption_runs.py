"""What the preemption tests share (tests/checkpoint/test_preemption_*.py and
test_resize_slurm.py): a trainer on an in-process source (`make_trainer`), the heat
example's small study (`HEAT_FLAGS`), and a requeued run of a job script on a one-node
Slurm test cluster of its own (`requeued_on_a_test_cluster`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from helpers import small_model, xy
from waiting import wait_until

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

HEAT = Path(__file__).parents[2] / "examples" / "heat_pde" / "train.py"
#: the study of `HEAT_FLAGS`: simulations, time steps of each
HEAT_SIMULATIONS, HEAT_STEPS = 10, 20
#: a small study paced by the simulations (about 250 steps), training from 1.5
#: simulations' samples on (the watermark; 3 on two ranks): a signal at the first logged
#: step leaves most simulations to the resumed run
HEAT_FLAGS = [
    "--num_simulations", str(HEAT_SIMULATIONS), "--time_steps", str(HEAT_STEPS),
    "--grid_size", "10",
    "--job_limit", "2", "--num_validation", "2", "--hidden", "64", "--learning_rate", "3e-3",
    "--buffer_size", "400", "--watermark", "30", "--batch_size", "16",
    "--sample_to_insert_ratio", "20", "--eval_steps", "none", "--logging_steps", "10",
    "--disable_progress_bar", "--no_plot", "--report_to", "none", "--json",
]  # fmt: skip


def make_trainer(out: Path, source: Any, hooks: list[Hook], **overrides: Any) -> OnlineTrainer:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    options: dict[str, Any] = dict(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",  # each sample once: the step counts rely on it
        buffer_size=64,
        watermark=8,
        stop_sync_steps=2,
        logging_steps=1000,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model()
    return OnlineTrainer(
        model,
        TrainingArguments(**{**options, **overrides}),
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=source,
        process_sample=xy,
        hooks=hooks,
    )


def requeued_on_a_test_cluster(
    tmp_path: Path, script: str, before_requeue: Callable[[], object], timeout: float
) -> tuple[int, dict[str, Any], str]:
    """Run the job script `script` (its log: ``tmp_path/out/job.log``) on a one-node
    test cluster of its own: after its first logged training step and `before_requeue`,
    its batch shell gets USR1 (what ``--signal=B:USR1@300`` does 300 s before the time
    limit); within `timeout` s, the requeued run's summary. Checks that the first run
    was preempted, that the job was requeued once and completed, with every simulation
    finished. Returns the step preempted at, the summary and the log."""
    from slurm_cluster import one_node_cluster

    log = tmp_path / "out" / "job.log"
    (tmp_path / "job.sh").write_text(script)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])

    def text() -> str:
        return log.read_text(errors="replace") if log.exists() else ""

    with one_node_cluster() as cluster:
        job = cluster.run("sbatch", "--parsable", str(tmp_path / "job.sh"), env=env).strip()
        wait_until(lambda: re.search(r"^step \d+ \| loss", text(), re.M), "training", 240)
        before_requeue()
        cluster.run("scancel", "--batch", "--signal=USR1", job, env=env)
        wait_until(lambda: re.search(r"^\{.*\}$", text(), re.M), "the requeued run's end", timeout)
        wait_until(
            lambda: not cluster.run("squeue", "-h", "-j", job, env=env).strip(), "the job's end", 60
        )
        details = cluster.run("scontrol", "show", "job", job, env=env)
    preempted = re.search(r"preempted by SIGTERM at step (\d+)", text())
    assert preempted, text()[-4000:]
    step = int(preempted.group(1))
    summary = json.loads(re.findall(r"^\{.*\}$", text(), re.M)[-1])
    assert summary["steps"] > step and summary["study"]["finished"] == HEAT_SIMULATIONS, summary
    assert "Restarts=1" in details and "JobState=COMPLETED" in details, details
    assert "ExitCode=0:0" in details, details
    return step, summary, text()
