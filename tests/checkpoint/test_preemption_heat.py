"""Preemption end to end, on the heat example: SIGTERM or SIGINT to one process, or
SIGTERM to either of two ranks under `accelerate launch`, stops every rank at one step
with one checkpoint and the solvers gone; a resumed run completes the study.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from held_ports import held_port
from preemption_runs import HEAT, HEAT_FLAGS, HEAT_SIMULATIONS
from process_tree import processes_with
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import list_checkpoints

LINUX = Path("/proc/self/environ").exists()


class Lines:
    """A process's output, read line by line in a thread (a full pipe would block it)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for(self, pattern: str, proc: subprocess.Popen[str], timeout: float = 120) -> str:
        regex = re.compile(pattern)

        def found() -> str | None:
            return next((line for line in self.lines if regex.search(line)), None)

        wait_until(lambda: found() or proc.poll() is not None, pattern, timeout)
        line = found()
        assert line is not None, f"{pattern!r} not in the output:\n{self.text[-3000:]}"
        return line

    @property
    def text(self) -> str:
        self._thread.join(5)
        return "".join(self.lines)


def heat(out: Path, *flags: str, launch: list[str] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    if launch:
        env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    return subprocess.Popen(
        [*(launch or [sys.executable]), str(HEAT), *HEAT_FLAGS, "--output_dir", str(out), *flags],
        cwd=out.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def kill_all(proc: subprocess.Popen[str], marker: str) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in processes_with(marker):
        os.kill(pid, signal.SIGKILL)


def check_preempted_run(out: Path, lines: Lines, sig: int, ranks: int = 1) -> int:
    """One checkpoint, of the step every rank stopped at, with every rank's files; no
    simulation left. Returns the step."""
    checkpoints = list_checkpoints(out / "checkpoints")
    assert len(checkpoints) == 1, (checkpoints, lines.text[-3000:])
    step = int(checkpoints[0].name.split("-")[1])
    assert step > 0
    assert f"stopped at step {step}, as every rank; its checkpoint is written" in lines.text
    assert f"preempted by {signal.Signals(sig).name} at step {step}" in lines.text
    for rank in range(ranks):
        assert (checkpoints[0] / f"rank_{rank}" / "source.json").is_file(), list(
            checkpoints[0].iterdir()
        )
    assert not (checkpoints[0] / f"rank_{ranks}").exists()
    assert "SourceError" not in lines.text
    # no traceback, except accelerate's own for a rank that exited non-zero
    assert lines.text.count("Traceback") == lines.text.count("ChildFailedError: "), lines.text
    wait_until(lambda: processes_with(str(out / "rendezvous")) == [], "the solvers' end", 15)
    return step


def resume_completes(out: Path, step: int, launch: list[str] | None = None) -> None:
    proc = heat(out, "--resume_from_checkpoint", "latest", launch=launch)
    lines = Lines(proc)
    try:
        try:
            code = proc.wait(240)
        except subprocess.TimeoutExpired:  # say what the resumed run was doing
            pytest.fail(f"the resumed run did not end in 240 s:\n{lines.text[-6000:]}")
        assert code == 0, lines.text[-3000:]
    finally:
        kill_all(proc, str(out / "rendezvous"))
    summary = json.loads([line for line in lines.text.splitlines() if line.startswith("{")][-1])
    assert summary["steps"] > step and summary["study"]["finished"] == HEAT_SIMULATIONS, summary
    # the study's times span both runs: the resumed run says so, and prints no overlap
    resumed_from = str(out / "checkpoints" / f"checkpoint-{step}")
    assert summary["resumed_from"] == resumed_from
    assert f"overlap: not measured for a run resumed from {resumed_from}" in lines.text


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_heat_example_preempted_checkpoints_stops_the_solvers_and_resumes(
    tmp_path: Path, sig: int
) -> None:
    out = tmp_path / "out"
    proc = heat(out)
    lines = Lines(proc)
    try:
        lines.wait_for(r"^step \d+ \| loss", proc)  # training, in the middle of the study
        proc.send_signal(sig)
        assert proc.wait(60) == 128 + sig, lines.text[-3000:]
        step = check_preempted_run(out, lines, sig)
    finally:
        kill_all(proc, str(out / "rendezvous"))
    if sig == signal.SIGTERM:  # (the resume does not depend on the signal)
        resume_completes(out, step)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def rank_of(pid: int) -> int | None:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    ranks = [int(v[5:]) for v in environ if v.startswith(b"RANK=")]
    return ranks[0] if ranks else None


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
@pytest.mark.parametrize("signalled", [1, 0], ids=["rank1", "rank0"])
def test_sigterm_to_one_of_two_ranks_stops_both_at_one_step_with_one_checkpoint(
    tmp_path: Path, signalled: int
) -> None:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"

    def launch() -> list[str]:
        return [accelerate, "launch", "--multi_gpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                "--main_process_port", str(held_port())]  # fmt: skip

    out = tmp_path / "out"
    proc = heat(out, launch=launch())
    lines = Lines(proc)
    try:
        lines.wait_for(r"^step \d+ \| loss", proc, timeout=180)
        ranks = {rank_of(pid): pid for pid in children(proc.pid)}
        assert set(ranks) >= {0, 1}, ranks
        # rank 1: not the one that runs the launcher, which learns it from the all-reduce;
        # rank 0: the one that runs it, whose notice rank 1 learns from the all-reduce
        os.kill(ranks[signalled], signal.SIGTERM)
        # accelerate launch reports a failed rank with exit status 1, whatever its code
        assert proc.wait(120) == 1, lines.text[-3000:]
        step = check_preempted_run(out, lines, signal.SIGTERM, ranks=2)
        assert re.search(r"exitcode\s*:\s*143", lines.text), lines.text[-3000:]
        # both ranks stopped at the step of the checkpoint
        for rank in (0, 1):
            assert f"rank {rank} stopped at step {step}, as every rank" in lines.text
    finally:
        kill_all(proc, str(out / "rendezvous"))
    resume_completes(out, step, launch=launch())
