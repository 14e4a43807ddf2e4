"""The heat example in worker mode (``--worker``) stopped mid-study, by SIGTERM (a
preemption: it checkpoints and exits) or SIGKILL (a crash), then resumed from
``latest`` with ``--worker``: the resume exits 0, every (simulation, time step) is
trained exactly once in the lineage of the final state (the steps up to the checkpoint
resumed from, then the resumed run's), and no worker is left once each run is over.

The lineage is `tests/scripts/heat_lineage.py`'s (the crash tests' driver,
tests/checkpoint/test_crash_resume.py): one line per step naming the batch's samples.
The oracle of "left" is /proc: every process whose environment names the run's
rendezvous directory (each worker's, whatever its process group).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_tree import processes_with, sigkill_between_launches

from melissa_trainer.common.checkpoint_names import latest_checkpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

TESTS = Path(__file__).parents[1]
DRIVER = TESTS / "scripts" / "heat_lineage.py"
TAMPERED_SOLVERS = TESTS / "scripts" / "tampered_solvers"  # a sitecustomize.py
SIMULATIONS, STEPS, BATCH, SAVE_STEPS = 6, 12, 4, 4
TOTAL_STEPS = SIMULATIONS * STEPS // BATCH
FLAGS = [
    "--worker",
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "6",
    "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "16", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", str(BATCH),
    "--save_steps", str(SAVE_STEPS), "--logging_steps", "5", "--eval_steps", "none",
    "--disable_progress_bar", "--stop_sync_steps", "2", "--json",
]  # fmt: skip


class Run:
    """One trainer process (its own session) with its lineage log; `paced`: slow steps
    and slow workers, so that the test stops it while workers run."""

    def __init__(self, tmp: Path, name: str, *extra: str, paced: bool = True) -> None:
        self.log, self.out = tmp / f"{name}.lineage", tmp / "out"
        path = os.pathsep.join(filter(None, [str(TAMPERED_SOLVERS), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "LINEAGE_LOG": str(self.log),
               "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
        if paced:
            env.update(STEP_SLEEP="0.1", SOLVER_STEP_SLEEP="0.05")
        self.output_path = tmp / f"{name}.out"
        with open(self.output_path, "w") as output:
            self.proc = subprocess.Popen(
                [sys.executable, str(DRIVER), *FLAGS, "--output_dir", str(self.out), *extra],
                cwd=tmp,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def steps(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """(step, [(simulation, time step), ...]) of each step trained (whole lines)."""
        if not self.log.exists():
            return []
        lines = []
        for line in self.log.read_text().split("\n")[:-1]:
            step, *keys = line.split()
            if len(keys) == BATCH:
                pairs = [(int(k.split(":")[0]), int(k.split(":")[1])) for k in keys]
                lines.append((int(step), pairs))
        return lines

    def workers(self) -> list[int]:
        return processes_with(str(self.out / "rendezvous"))

    def wait(self, timeout: float) -> int:
        """The trainer's exit status; past `timeout`, its process group is killed."""
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def clean(self) -> None:
        """Kill what a failed test left: the trainer, any worker (never a passing test's:
        it checks that none is left before this runs)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.wait(0)  # (kills it if it still runs)
        for pid in self.workers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def output(self) -> str:
        return self.output_path.read_text()[-4000:]


def no_worker_left(run: Run) -> None:
    """No worker of `run` is alive 60 s after its trainer exited (its launcher stops
    them; the local backend's parent-death signal is the last guard, a few ms late)."""
    deadline = time.monotonic() + 60
    while run.workers():
        assert time.monotonic() < deadline, f"workers outlived the trainer: {run.workers()}"
        time.sleep(0.1)


def saved_steps(out: Path) -> int:
    found = latest_checkpoint(out / "checkpoints")
    return 0 if found is None else int(found.name.split("-")[1])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_worker_study_stopped_mid_run_resumes_training_each_step_exactly_once(
    tmp_path: Path, sig: int
) -> None:
    runs: list[Run] = []
    try:
        check_a_stop_and_its_resume(tmp_path, sig, runs)
    finally:
        for run in runs:
            run.clean()


def check_a_stop_and_its_resume(tmp_path: Path, sig: int, runs: list[Run]) -> None:
    first = Run(tmp_path, "first")
    runs.append(first)
    deadline = time.monotonic() + 150
    try:
        # a checkpoint, a few steps past it, and workers mid-study
        while not (
            saved_steps(first.out) and len(first.steps()) >= SAVE_STEPS + 2 and first.workers()
        ):
            assert first.proc.poll() is None, f"ended too soon: {first.output()}"
            assert time.monotonic() < deadline, f"never mid-study: {first.output()}"
            time.sleep(0.05)
        if sig == signal.SIGKILL:  # the trainer (its launcher) dies; the workers must too
            workers = set(first.workers())
            trainers = set(processes_with(str(first.log))) - workers
            sigkill_between_launches(first.proc.pid, sorted(trainers))
        else:
            first.proc.send_signal(sig)  # preempted: a checkpoint, then exit
        code = first.proc.wait(120)
    finally:
        first.wait(30)
    assert code != 0, first.output()
    if sig == signal.SIGTERM:
        assert "preempted by SIGTERM" in first.output(), first.output()
    no_worker_left(first)
    saved = saved_steps(first.out)
    assert saved

    second = Run(tmp_path, "second", "--resume_from_checkpoint", "latest", paced=False)
    runs.append(second)
    code = second.wait(200)
    assert code == 0, second.output()
    no_worker_left(second)

    before = [keys for step, keys in first.steps() if step <= saved]
    after = [keys for _, keys in second.steps()]
    assert len(before) == saved and all(s > saved for s, _ in second.steps())
    lineage = collections.Counter(k for keys in before + after for k in keys)
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    twice = sorted(k for k, n in lineage.items() if n > 1)
    assert set(lineage) == expected and not twice, (saved, twice[:10], expected - set(lineage))
    summary = json.loads([x for x in second.output().splitlines() if x[:1] == "{"][-1])
    assert summary["samples_received"] == SIMULATIONS * STEPS
    assert summary["study"]["finished"] == SIMULATIONS, summary["study"]
    logs = sorted(p.name for p in (second.out / "study" / "logs").glob("*.log"))
    assert logs and all(name.startswith("worker-") for name in logs), logs
