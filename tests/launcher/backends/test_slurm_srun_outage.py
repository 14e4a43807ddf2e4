"""Mode "srun" during a Slurm controller outage (stand-in commands): an srun that could
not reach the controller before any task ran ("Unable to confirm allocation ...: Unable
to contact slurm controller", exit 1, said in the job's log: what Slurm 22.05's srun
does, steps.py's docstring) is run again once squeue answers, a step of its name left by
a lost reply cancelled first; a step whose task ran and exited 1 is never run again; an
outage longer than `controller_wait` fails the step; a kill while it waits ends it.
Failed before (srun was never run again): the step reported 1.

Retries on a fake clock (`SlurmCommands.clock`/`sleep`), advanced by the test between
polls: no wall-clock waits are asserted."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.base import Handle

PYTHON = sys.executable
UNREACHABLE = (
    "srun: error: Unable to confirm allocation for job 77: Unable to contact slurm "
    "controller (connect failure)"
)
STAND_INS = {
    # fails as srun does without a controller for its first $FAILS calls, then runs
    "srun": f"""#!/bin/bash
n=$(cat "$FAKE/srun.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/srun.calls"
if [ "$n" -lt "${{FAILS:-1}}" ]; then
    echo "{UNREACHABLE}" >&2
    echo "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 77" >&2
    exit 1
fi
while [[ "$1" == -* ]]; do shift; done
exec "$@"
""",
    # squeue --steps: each call counted; fails while $FAKE/down exists, else lists $FAKE/steps
    "squeue": """#!/bin/bash
echo x >> "$FAKE/squeue.calls"
if [ -e "$FAKE/down" ]; then
    echo "squeue: error: Unable to contact slurm controller (connect failure)" >&2
    exit 1
fi
cat "$FAKE/steps" 2>/dev/null; exit 0
""",
    "scancel": '#!/bin/bash\necho "$@" >> "$FAKE/scancel.calls"\n',
}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir, state = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in STAND_INS.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE", str(state))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    return state


def _backend(controller_wait: float = 60) -> tuple[SlurmBackend, list[float]]:
    backend = SlurmBackend(mode="srun", controller_wait=controller_wait)
    now = [0.0]
    backend._commands.clock = lambda: now[0]
    return backend, now


def _finish(backend: SlurmBackend, handle: Handle, now: list[float]) -> int:
    """Poll to the end (90 s at most: a bound, not a measure), the fake clock 1 s
    further at each poll that finds it running."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        code = backend.poll(handle)
        if code is not None:
            return code
        now[0] += 1.0
        time.sleep(0.01)
    raise AssertionError(f"{backend.describe(handle)} did not end")


def _until_waiting(backend: SlurmBackend, handle: Handle) -> None:
    """Poll until the backend has seen srun's failure to reach the controller: the step
    waits out the outage (`retry_at` set). Each poll must find it running. 90 s at most
    (a bound, not a measure): failing it means the failure was never seen."""
    deadline = time.monotonic() + 90
    while handle.retry_at is None:  # type: ignore[attr-defined]
        assert backend.poll(handle) is None
        assert time.monotonic() < deadline, "srun's failure to reach the controller unseen"
        time.sleep(0.01)


def _count(fake: Path, name: str) -> int:
    """How many times the stand-in `name` was called (one line each)."""
    path = fake / f"{name}.calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _calls(fake: Path, name: str) -> list[str]:
    path = fake / f"{name}.calls"
    return path.read_text().split("\n") if path.exists() else []


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_an_srun_that_could_not_reach_the_controller_runs_again(
    fake: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (fake / "down").touch()
    (fake / "steps").write_text("77.3|mt-sim-1\n")  # (a lost reply's step without srun)
    backend, now = _backend()
    log = tmp_path / "sim.log"
    job = Job("sim-1", [PYTHON, "-c", "print('task ran')"], cwd=tmp_path, log_path=log)
    handle = backend.launch(job)
    try:
        _until_waiting(backend, handle)
        asked = _count(fake, "squeue")
        for _ in range(5):  # the controller away: no srun again, squeue asked at each retry
            now[0] = handle.retry_at  # type: ignore[attr-defined]  # (its next try: due)
            assert backend.poll(handle) is None
        assert _count(fake, "squeue") == asked + 5, _count(fake, "squeue")
        assert (fake / "srun.calls").read_text().strip() == "1"
        (fake / "down").unlink()
        assert _finish(backend, handle, now) == 0
    finally:
        backend.close()
    assert (fake / "srun.calls").read_text().strip() == "2"
    assert log.read_text().count("task ran") == 1
    assert "77.3" in _calls(fake, "scancel")[0]
    said = [r.getMessage() for r in caplog.records if "srun" in r.getMessage()]
    assert "srun could not reach the Slurm controller" in said[0], said
    assert "running it again for up to 60 s (controller_wait)" in said[0]
    assert any("srun runs again after" in line for line in said), said


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_step_whose_task_exited_1_is_not_run_again(
    fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILS", "0")
    backend, now = _backend()
    code = "print('task ran'); raise SystemExit(1)"
    log = tmp_path / "sim.log"
    try:
        handle = backend.launch(Job("sim-2", [PYTHON, "-c", code], cwd=tmp_path, log_path=log))
        assert _finish(backend, handle, now) == 1
    finally:
        backend.close()
    assert (fake / "srun.calls").read_text().strip() == "1"


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_an_outage_longer_than_controller_wait_fails_the_step(
    fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FAILS", "1000")
    backend, now = _backend(controller_wait=20)
    log = tmp_path / "sim.log"
    try:
        handle = backend.launch(Job("sim-3", ["true"], cwd=tmp_path, log_path=log))
        assert _finish(backend, handle, now) == 1
    finally:
        backend.close()
    assert 2 <= int((fake / "srun.calls").read_text()) <= 6  # (backoff 1, 2, 4, 8 s)
    said = [r.getMessage() for r in caplog.records if "unreachable for" in r.getMessage()]
    assert len(said) == 1 and "the step failed" in said[0], said


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_step_killed_while_it_waits_out_an_outage_ends(fake: Path, tmp_path: Path) -> None:
    (fake / "down").touch()
    backend, now = _backend()
    log = tmp_path / "sim.log"
    try:
        handle = backend.launch(Job("sim-4", ["true"], cwd=tmp_path, log_path=log))
        _until_waiting(backend, handle)  # srun's failure seen: the step waits
        assert (fake / "srun.calls").read_text().strip() == "1"
        assert backend.kill(handle, grace=1.0) is None
        now[0] += 100.0
        assert backend.poll(handle) is not None
    finally:
        backend.close()
    assert (fake / "srun.calls").read_text().strip() == "1"


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_step_without_a_log_is_not_run_again(fake: Path, tmp_path: Path) -> None:
    """docs/how-to/slurm.md: "A job without a log is not retried (srun's error goes to
    the trainer's stderr, which the backend does not read)": its unreachable srun ends
    the step with srun's exit 1, srun run once."""
    backend, now = _backend()
    try:
        handle = backend.launch(Job("sim-5", [PYTHON, "-c", "print('task ran')"], cwd=tmp_path))
        assert _finish(backend, handle, now) == 1
    finally:
        backend.close()
    assert (fake / "srun.calls").read_text().strip() == "1"
