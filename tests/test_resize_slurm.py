"""The job script of docs/how-to/resize.md on a real (one-node) Slurm cluster: signalled
at its "time limit", it checkpoints and requeues itself, and the requeued run starts
with another number of training ranks (2, then 3), resumes the checkpoint of 2 and
finishes the study.

The cluster has one node, so the node count cannot change; the script's ranks per node
(``GPUS_PER_NODE``) are read from a file that the test changes before the requeue, the
way the script's ``SLURM_JOB_NUM_NODES`` changes on a cluster. What is tested is the
rest: the requeue path, and `accelerate launch` resuming on another ``--num_processes``
from the script's command line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_preemption import HEAT, HEAT_FLAGS, free_port, wait_until

PAGE = Path(__file__).parents[1] / "docs" / "how-to" / "resize.md"


def resize_job_script(out: Path, ranks_file: Path) -> str:
    """The page's job script, for this cluster: one node, no GPU, the heat example for
    `train.py`, its ranks per node read from `ranks_file`, its log in `out`."""
    page = PAGE.read_text()
    section = page[page.index("## A Slurm requeue with another node count") :]
    script = section[section.index("```bash\n") + 8 :]
    script = script[: script.index("```")]
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    flags = " ".join([*HEAT_FLAGS, "--output_dir", str(out)])
    edits = [
        (r"^#SBATCH --gpus-per-node=.*\n", ""),
        (r"^#SBATCH --nodes=.*$", "#SBATCH --nodes=1"),
        (r"^#!/bin/bash\n", f"#!/bin/bash\n#SBATCH --output={out}/job.log\n"),
        (r"^export GPUS_PER_NODE=.*$", f"export GPUS_PER_NODE=$(cat {ranks_file})"),
        (r"accelerate launch --multi_gpu",
         f"{accelerate or 'accelerate'} launch --multi_gpu --mixed_precision no "
         "--dynamo_backend no"),
        (r"--main_process_port 29500", f"--main_process_port {free_port()}"),
        (r'train\.py --output_dir "\$SCRATCH/surrogate"', f"{HEAT} {flags}"),
    ]  # fmt: skip
    for pattern, replacement in edits:  # each once: a change of the page shows here
        script, n = re.subn(pattern, lambda _, r=replacement: r, script, flags=re.M)
        assert n == 1, (pattern, script)
    return script


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_resize_job_script_requeued_on_another_number_of_ranks_completes(
    tmp_path: Path,
) -> None:
    from slurm_cluster import SlurmCluster, skip_reason

    if skip_reason() is not None:
        pytest.skip(skip_reason())
    out = tmp_path / "out"
    out.mkdir()
    ranks = tmp_path / "ranks"
    ranks.write_text("2\n")
    (tmp_path / "job.sh").write_text(resize_job_script(out, ranks))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    cluster = SlurmCluster()
    try:
        cluster.start()
        env["SLURM_CONF"] = str(cluster.conf)

        def slurm(*argv: str) -> str:
            done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
            assert done.returncode == 0, done.stderr
            return done.stdout

        def log() -> str:
            path = out / "job.log"
            return path.read_text(errors="replace") if path.exists() else ""

        job = slurm("sbatch", "--parsable", str(tmp_path / "job.sh")).strip()
        wait_until(lambda: re.search(r"^step \d+ \| loss", log(), re.M), 240, "training")
        ranks.write_text("3\n")  # the requeued run's allocation
        slurm("scancel", "--batch", "--signal=USR1", job)  # what --signal=B:USR1@300 does
        wait_until(lambda: re.search(r"^\{.*\}$", log(), re.M), 420, "the requeued run's end")
        wait_until(lambda: not slurm("squeue", "-h", "-j", job).strip(), 60, "the job's end")
        details = slurm("scontrol", "show", "job", job)
    finally:
        cluster.stop()
    text = log()
    preempted = re.search(r"preempted by SIGTERM at step (\d+)", text)
    assert preempted, text[-4000:]
    step = int(preempted.group(1))
    # the first run's 2 ranks started afresh; the requeued run resumed, on 3 ranks
    assert text.count("no checkpoint under") == 2, text[-4000:]
    summary = json.loads(re.findall(r"^\{.*\}$", text, re.M)[-1])
    assert summary["steps"] > step and summary["study"]["finished"] == 16, summary
    ranks_of = {c.name: sorted(p.name for p in c.glob("rank_*"))
                for c in (out / "checkpoints").glob("checkpoint-*")}  # fmt: skip
    assert ranks_of[f"checkpoint-{step}"] == ["rank_0", "rank_1"], ranks_of
    assert ranks_of[f"checkpoint-{summary['steps']}"] == ["rank_0", "rank_1", "rank_2"]
    assert summary["samples_received"] == 16 * 20, summary  # each (simulation, step) once
    assert "Restarts=1" in details and "JobState=COMPLETED" in details, details
    assert "ExitCode=0:0" in details, details
