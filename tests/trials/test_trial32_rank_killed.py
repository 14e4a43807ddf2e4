"""Severity MEDIUM. User trial 32: on two ranks, a rank killed with SIGKILL makes the
solvers started by hand give up for good, where one rank's SIGKILL is followed.

What a user did: a serving trainer on two gloo ranks (``accelerate launch --multi_gpu
--num_processes 2``, external mode: `tests/trials/trial32_trainer.py`), two Python
solvers started by hand (`trial32_solver.py`: they ask a prediction, then send, each
step). Rank 1 was killed with SIGKILL (the OOM killer's signal); the trainer was then
resumed with ``--resume_from_checkpoint latest``, as docs/how-to/preemption.md ("When
one rank dies") says.

What happened: rank 0 failed in its next collective (gloo: "Connection closed by peer"),
found no note of rank 1's (a rank killed by a signal writes none), and wrote its stop
record as ``error`` ("training stopped at step N: RuntimeError: ... Connection closed by
peer"). A record that says the trainer failed ends a solver's send at once
(`StoppedWhileSending`, "no trainer comes back there"): both solvers exited 1 before the
resume, and the resumed trainer waited for data that never came ("no data yet").
Nothing was lost (running the solvers again by hand fed the resumed trainer the steps
it lacked), but the solvers did not follow a resume, as they do after a single rank's
SIGKILL (no record: they wait and follow) or a SIGTERM (``preempted``).

Expected: a rank stopped because another rank is gone without a note (killed by a
signal) is a crash a resume recovers from, as the KeyboardInterrupt that
`trainer.failing` notes ``preempted``: the solvers wait for the resumed trainer, follow
it, and end with status 0, every step trained on. Fixed (`trainer.failing.failed` notes
it ``preempted``); before the fix this test failed: both solvers exited 1
(`TrainerStopped`, "recorded why: error: training stopped at step 50: RuntimeError:
... Connection reset by peer").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from held_ports import held_port
from waiting import UNTIL_TEST_TIMEOUT, wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STEPS = 400

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="/proc for the ranks' pids"),
]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
            "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip


def launch(tmp: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--main_process_port", str(held_port()),
        str(HERE / "trial32_trainer.py"), "--rendezvous", str(tmp / "rdv"), "--sims", "2",
        "--output_dir", str(tmp / "out"), "--disable_progress_bar", "--report_to", "none",
        "--save_steps", "50", "--logging_steps", "100000", *extra,
    ]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, env=env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def rank_pid(rank: int, marker: str) -> int | None:
    """The pid of training rank `rank` whose command line names `marker`."""
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or marker.encode() not in (entry / "cmdline").read_bytes():
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ:
            return int(entry.name)
    return None


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.timeout(480)
def test_solvers_follow_a_resume_after_one_rank_was_killed(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    first = launch(tmp_path, tmp_path / "trainer1.log")
    procs.append(first)
    solvers = []
    for sid in range(2):
        with (tmp_path / f"sim{sid}.log").open("wb") as out:
            solver = subprocess.Popen(
                [sys.executable, str(HERE / "trial32_solver.py"), str(STEPS), "0.5", "0.02"],
                env={**env(), "MELISSA_TRAINER_SIMULATION_ID": str(sid),
                     "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rdv")},
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        procs.append(solver)
        solvers.append(solver)
    checkpoints = tmp_path / "out" / "checkpoints"
    wait_until(
        lambda: any(p.name.startswith("checkpoint-") for p in checkpoints.glob("*")),
        "a first checkpoint",
        UNTIL_TEST_TIMEOUT,
        procs=[first],
        interval=0.05,
    )
    victim = rank_pid(1, str(tmp_path))
    assert victim is not None, "rank 1's process"
    os.kill(victim, signal.SIGKILL)
    first.wait()
    assert first.returncode != 0
    resumed = launch(tmp_path, tmp_path / "trainer2.log", "--resume_from_checkpoint", "latest")
    procs.append(resumed)
    for solver in solvers:
        solver.wait()
    said = "\n".join((tmp_path / f"sim{i}.log").read_text()[-1500:] for i in range(2))
    assert [s.returncode for s in solvers] == [0, 0], said
    resumed.wait()
    log = (tmp_path / "trainer2.log").read_text()
    assert resumed.returncode == 0, log[-3000:]
    puts = [line for line in log.splitlines() if "end of stream (2 simulations finished" in line]
    assert len(puts) == 2, log[-3000:]
    assert sum(int(line.split("; ")[1].split()[0]) for line in puts) == 2 * STEPS, puts
