"""Bitwise resume with every buffer: a trainer SIGKILLed after a checkpoint and resumed
from "latest" ends with the weights, losses, logs and counters of a run never stopped.

The source is an in-process iterable (`IterableSource`), whose fill rule makes a run
reproducible; each scenario first checks that two uninterrupted runs agree bit for bit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import latest_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.e2e]

SCRIPT = Path(__file__).parents[1] / "resume_scenario.py"

STREAMING = {"n_samples": 400, "save_steps": 10, "kill": {"pseudo_epoch": 0, "from_step": 20}}
SCENARIOS = {
    "fifo": {"buffer": "fifo", **STREAMING},
    "firo": {"buffer": "firo", **STREAMING},
    "reservoir": {"buffer": "reservoir", **STREAMING},
    # two micro-batches per step: Accelerate's accumulation state at a step boundary
    "reservoir-accumulation": {
        "buffer": "reservoir", "gradient_accumulation_steps": 2, "n_samples": 300,
        "save_steps": 5, "kill": {"pseudo_epoch": 0, "from_step": 9},
    },
    # batches taken as blocks (process_batch): pending blocks in the checkpoint
    "firo-columnar": {"buffer": "firo", "columnar": True, **STREAMING},
    # the rate limiter holds inserts to 2 draws each: samples are drawn again
    "reservoir-rate-limited": {
        "buffer": "reservoir", "sample_to_insert_ratio": 2.0, "max_steps": 70, **STREAMING,
    },
    # killed while replaying the buffer after the stream ended, from a checkpoint there
    "reservoir-pseudo-epoch": {
        "buffer": "reservoir", "buffer_size": 64, "pseudo_epochs": 3, "n_samples": 120,
        "save_steps": 5, "kill": {"pseudo_epoch": 1, "from_step": 0},
    },
    # the least-drawn of 2 candidates, from the columnar reservoir (blocks pending)
    "reservoir-draw-choices": {
        "buffer": "reservoir", "draw_choices": 2, "columnar": True, **STREAMING,
    },
    # features at ingest (issue 42): the buffer and the pending batches hold transformed
    # samples, which the resume must not transform again (the transform is not idempotent)
    "reservoir-ingest-sample": {"buffer": "reservoir", "ingest": "sample", **STREAMING},
    "reservoir-ingest-block-columnar": {
        "buffer": "reservoir", "ingest": "block", "columnar": True, **STREAMING,
    },
    # FIRO replays the samples it retained (in the checkpoint too)
    "firo-pseudo-epoch": {
        "buffer": "firo", "pseudo_epochs": 2, "n_samples": 120, "save_steps": 5,
        "kill": {"pseudo_epoch": 1, "from_step": 0},
    },
}  # fmt: skip


def killed_run(config: dict[str, Any], tmp_path: Path) -> int:
    """Run `config` in a subprocess, SIGKILL it where its kill hook blocks; returns the
    step at which it was killed."""
    marker = tmp_path / "killed_at"
    cfg = dict(config, kill=dict(config["kill"], marker=str(marker)))
    cfg["result"] = str(tmp_path / "never_written.json")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def said() -> str:  # (its stderr once it has ended: a running one's pipe stays open)
            ended = proc.poll() is not None and proc.stderr is not None
            err = proc.stderr.read().decode()[-3000:] if ended and proc.stderr else ""
            return f"the run's kill point{': ' + err if err else ''}"

        wait_until(marker.exists, said, 180, procs=[proc], interval=0.1)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if proc.stderr:
            proc.stderr.close()
    assert not Path(cfg["result"]).exists()
    return int(marker.read_text())


@pytest.mark.parametrize("name", SCENARIOS)
def test_sigkill_and_resume_equals_an_uninterrupted_run(name: str, tmp_path: Path) -> None:
    base = {k: v for k, v in SCENARIOS[name].items() if k != "kill"}
    full = run(dict(base, output_dir=str(tmp_path / "a")))
    again = run(dict(base, output_dir=str(tmp_path / "b")))
    assert again == full  # (a) reproducible: weights, every loss, logs, counters

    out = str(tmp_path / "killed")
    config = dict(SCENARIOS[name], output_dir=out)
    killed_at = killed_run(config, tmp_path)
    checkpoint = latest_checkpoint(Path(out) / "checkpoints")
    assert checkpoint is not None
    saved_at = int(checkpoint.name.split("-")[1])
    assert saved_at == killed_at - 2  # killed mid-run, two steps after that save
    if "pseudo-epoch" in name:
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        assert state["pseudo_epoch"] == 1 and state["stream_ended"]

    resumed = run(dict(base, output_dir=out, resume_from_checkpoint="latest"))
    assert resumed["params"] == full["params"]  # bitwise
    assert resumed["losses"] == [(s, loss) for s, loss in full["losses"] if s > saved_at]
    assert resumed["logs"] == [log for log in full["logs"] if log["step"] > saved_at]
    for key in ("global_step", "samples_seen", "total_samples_seen", "pseudo_epoch", "buffer"):
        assert resumed[key] == full[key], key


@pytest.mark.parametrize("columnar", [False, True], ids=["samples", "blocks"])
@pytest.mark.parametrize("new_size", [4, 5, 12])
def test_a_resume_with_another_batch_size_trains_every_batch_at_the_new_size(
    tmp_path: Path, new_size: int, columnar: bool
) -> None:
    """A trainer SIGKILLed with batches of 8 pending in its checkpoint, resumed with
    another ``batch_size``: each step trains ``new_size`` samples (the last may be short,
    the stream's end), and each of the stream's samples is trained on once, none lost or
    repeated with the pending batches regrouped (the oracle: the FIFO's count of the
    samples put, each used once)."""
    # saved at step 25, inside a window of stop_sync_steps=4: batches pending
    kill = {"pseudo_epoch": 0, "from_step": 21}
    config = {"buffer": "fifo", "columnar": columnar, **STREAMING, "save_steps": 5, "kill": kill}
    out = str(tmp_path / "killed")
    killed_run(dict(config, output_dir=out), tmp_path)
    checkpoint = latest_checkpoint(Path(out) / "checkpoints")
    assert checkpoint is not None
    pending = json.loads((checkpoint / "rank_0" / "pending.json").read_text())["fields"]
    assert pending and {len(batch) for batch in pending} == {8}  # batches of the old size

    base = {k: v for k, v in config.items() if k != "kill"}
    resumed = run(dict(base, output_dir=out, batch_size=new_size, resume_from_checkpoint="latest"))
    sizes = resumed["samples_per_step"]
    assert sizes and set(sizes[:-1]) == {new_size} and 0 < sizes[-1] <= new_size, sizes
    assert resumed["samples_seen"] == resumed["buffer"][0] == STREAMING["n_samples"]
