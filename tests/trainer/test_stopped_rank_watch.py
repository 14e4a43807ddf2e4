"""A rank stopped (SIGSTOP) in the middle of a checkpoint save, before a stop
agreement, in its source's start, or in the middle of a window's steps, under a real
launch (``accelerate launch --multi_gpu --num_processes 2``, gloo on CPU): the other
rank, held in the save's all-gather, the agreement or the barrier once every source
started, warns (the wait watch, `core.wait_watch`) naming the collective (the checkpoint
and the save's step), the rank likely late (from the launcher's store:
`trainer.roll_call`) and how to find a stopped rank; once the stopped rank is continued
(SIGCONT) the run finishes normally, its checkpoints complete.

In the middle of a window (mode ``steps``), rank 0 waits in DDP's backward (gloo), which
no wait watches: its span of steps warns that it "has completed no step" (no rank named:
both are at the same wait), then that its step completed. Before, the save's
collectives, the barrier once every source started, and a window's steps were not
watched: rank 0 waited silently until the process group's timeout (30 minutes by
default), and no warning named a rank. The script: tests/scripts/stopped_rank_save.py
(its docstring says the run). The test waits on files and on the launch's output, never
on a sleep: rank 1 says where it is (``held-1``), the watch's bound is 1 s (the script
sets it as the unit tests do)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: waiting, stopped_process
from held_ports import held_port  # noqa: E402
from stopped_process import stop  # noqa: E402
from waiting import wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "stopped_rank_save.py"
WAIT = 240.0  # seconds any one event is waited for (a loaded machine: never reached)


@pytest.mark.e2e
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; accelerate launch with gloo")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["save", "agreement", "start", "steps"])
def test_a_rank_stopped_in_a_save_or_before_an_agreement_is_named_and_the_run_ends(
    tmp_path: Path, mode: str
) -> None:
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--main_process_port", str(held_port()),
        str(SCRIPT), str(out), "1.0", mode,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.update({"CUDA_VISIBLE_DEVICES": "", "PYTHONFAULTHANDLER": "1"})
    said = tmp_path / "said.txt"
    with said.open("w") as sink:
        proc = subprocess.Popen(
            cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    held: int | None = None
    try:
        wait_until((out / "held-1").exists, "rank 1 at its save", WAIT, procs=[proc])
        held = int((out / "held-1").read_text())
        stop(held)
        before = len(said.read_text())  # a warning said from here on came while it stood
        words = "rank 0 has completed no step" if mode == "steps" else "rank 0 has waited"

        def warned() -> bool:
            return words in said.read_text()[before:]

        wait_until(warned, lambda: f"rank 0's warning: {said.read_text()[-3000:]}", WAIT)
        (out / "go").write_text("")
        os.kill(held, signal.SIGCONT)
        held = None
        proc.wait(WAIT)
    finally:
        if held is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(held, signal.SIGCONT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    text = said.read_text()
    assert proc.returncode == 0, text[-6000:]
    # (the first said while rank 1 stood: an earlier one, of a slow rank, may differ)
    first = next((x for x in text[before:].splitlines() if words in x), "")
    # which collective, the rank likely late (from the launcher's store), the usual
    # cause, and what to do
    if mode != "steps":  # (a span of steps names no rank: every rank is at the same wait)
        assert "another rank (likely late: rank 1) has not reached it" in first, text
    assert "kill -CONT PID" in first and "py-spy dump" in first, text
    if mode == "steps":  # rank 0 in step 4's backward (gloo), which no wait watches
        assert "(in step 4;" in first and "DDP's backward all-reduce" in first, text
        assert "rank 0: step 4 completed after" in text, text
        steps, saved = "10", ["checkpoint-10"]
    elif mode == "start":
        where = "the other ranks at the start of training, once every rank's source started"
        assert f"{where} (a barrier)" in first, text
        assert "loading its checkpoint or starting its source" in first, text
        steps, saved = "10", ["checkpoint-10"]
    elif mode == "save":
        where = "the other ranks at checkpoint-4's save, step 2 of 4 (every rank writes its files)"
        assert f"{where} (a checkpoint's all-gather)" in first, text
        assert "writing or reading its checkpoint files" in first, text
        steps, saved = "6", ["checkpoint-4", "checkpoint-6"]
    else:
        where = "the other ranks at the stop agreement"
        assert where in first and "waiting for its data" in first, text
        steps, saved = "10", ["checkpoint-10"]
    if mode != "steps":
        assert f"rank 0: {where}" in text and "arrived after" in text, text
    # the run finished normally: both ranks at the last step, the checkpoints complete
    assert [(out / f"done-{r}").read_text() for r in range(2)] == [steps] * 2, text[-3000:]
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir() if p.is_dir())
    assert checkpoints == saved, checkpoints
    for name in checkpoints:
        assert (out / "checkpoints" / name / "manifest.json").is_file(), name
