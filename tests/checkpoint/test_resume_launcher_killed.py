"""kill -9 of `accelerate launch` (2 gloo ranks, the heat example's study): each rank sees its
launcher gone and stops with a checkpoint, and the same command resumes the study, every
sample kept once (the oracle of tests/checkpoint/test_resume_resize.py, `resize_oracle`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from process_tree import live, processes_with
from resize_oracle import check_resumed
from resize_runs import SOLVERS_GONE, Case, Run, checkpoints
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import latest_checkpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
    pytest.mark.e2e,
]


@pytest.mark.timeout(420)
def test_ranks_whose_launcher_is_killed_stop_with_a_checkpoint_and_the_study_resumes(
    tmp_path: Path,
) -> None:
    """kill -9 of `accelerate launch` (2 gloo ranks): the kill does not reach the ranks
    (torch's launcher starts each in a session of its own), which trained on for the
    rest of the study (a user's report), holding the output directory and their
    solvers. Now each rank sees its launcher gone (`preemption.PARENT_POLL`, 1 s) and
    stops as if preempted: every rank exits, with a checkpoint of the step they stopped
    at, the output directory's lock free, no solver left, long before the study could
    have ended (solvers of 3 s a step: about 2 minutes); the same command resumes, the
    study finishes, every sample kept once (the oracle of test_resume_resize.py)."""
    buffer = ("--buffer", "fifo", "--save_steps", "1")
    case = Case(2, 2, buffer, signal.SIGKILL)
    first = Run(tmp_path, "first", 2, *buffer, paced=True, solver_step_sleep=3.0)
    ranks: list[int] = []
    try:
        rendezvous = str(first.out / "rendezvous")
        wait_until(
            lambda: checkpoints(first.out) and processes_with(rendezvous),
            lambda: f"a checkpoint, with simulations running: {first.output()}",
            150,
            procs=[first.proc],
            interval=0.05,
        )
        ranks = [pid for pid in first.trainers() if pid != first.proc.pid]
        assert len(ranks) == 2, (ranks, first.output())
        os.kill(first.proc.pid, signal.SIGKILL)  # the launcher alone
        first.proc.wait(30)
        # a bound on a hang (the rest of the study takes about 2 minutes), not a speed
        wait_until(
            lambda: not [pid for pid in ranks if live(pid)],
            lambda: (
                f"the ranks' end, their launcher dead (alive: {[p for p in ranks if live(p)]}); "
                f"their output: {first.output()}"  # (once seen under load: what they said)
            ),
            60,
            interval=0.1,
        )
        wait_until(lambda: not processes_with(rendezvous), SOLVERS_GONE, 60, interval=0.1)
    finally:
        for pid in ranks + processes_with(str(first.out / "rendezvous")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        first.wait(10)
    text = Path(first.log.name).read_text()
    gone = re.findall(r"the launcher \(accelerate launch, pid (\d+)\) is gone: stopping", text)
    assert gone == [str(first.proc.pid)] * 2, text[-3000:]  # each rank saw it
    stopped = re.findall(r"stopped at step (\d+) because the launcher \(accelerate", text)
    checkpoint = latest_checkpoint(first.out / "checkpoints")
    assert checkpoint is not None and stopped, text[-3000:]
    saved = int(checkpoint.name.split("-")[1])
    assert {int(n) for n in stopped} == {saved}, (stopped, saved)  # the stop's checkpoint
    with open(first.out / "trainer.lock", "a") as lock:  # free: no rank holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(lock, fcntl.LOCK_UN)
    resumed_from = shutil.copytree(checkpoint, tmp_path / "resumed-from")

    second = Run(tmp_path, "second", 2, *buffer, "--resume_from_checkpoint", "latest",
                 paced=False)  # fmt: skip
    assert second.wait(300) == 0, second.output()
    assert any(second.put_log(r) for r in range(2)), "the first run had ended the study"
    check_resumed("2to2-launcher-killed", case, first, second, resumed_from, saved)
