"""Slurm batch jobs against the real one-node cluster (tests/slurm_cluster.py): a
gfortran solver's lines reach its log before the launcher's kill (its batch job runs
with ``GFORTRAN_UNBUFFERED_PRECONNECTED=y``, as local and mpiexec jobs do), and the kill
writes the launcher's line, with its reason, in the log before its scancel, as `close`
does for a job it cancels; a failure report quotes the solver's last lines, not Slurm's
of the kill."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, PYTHON, finish
from test_compiled_solver_logs import FORTRAN_SOLVER, LINES, build
from test_slurm_srun_segments import in_allocation

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.exit_cause import exit_text
from melissa_trainer.launcher.reports import log_tail
from melissa_trainer.launcher.systematic import last_log_line

#: pytest-xdist: this module's tests on one worker, which starts the module's one cluster
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: the launcher's prefix, written out (the oracle: users grep for it)
PREFIX = "[melissa-trainer launcher] "


def launcher_said(text: str) -> list[str]:
    """The launcher's lines in a log, a line cut at 100 columns joined again (its next
    lines start with the prefix and two spaces); each of 100 columns at most."""
    said: list[str] = []
    for line in text.splitlines():
        if line.startswith(PREFIX):
            assert len(line) <= 100, line
            if line.startswith(PREFIX + "  ") and said:
                said[-1] += " " + line.removeprefix(PREFIX + "  ")
            else:
                said.append(line)
    return said


@pytest.mark.timeout(240)
def test_a_killed_gfortran_batch_jobs_log_keeps_its_lines_and_says_the_kill(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failed before: the log held no solver line (gfortran buffers a unit on a file in
    blocks; Slurm's batch jobs lacked the variable), and `kill` took no reason."""
    monkeypatch.delenv("GFORTRAN_UNBUFFERED_PRECONNECTED", raising=False)  # (inherited)
    exe = build("gfortran", FORTRAN_SOLVER, ".f90", tmp_path)
    backend = SlurmBackend(poll_every=POLL, time_limit=5, script_dir=tmp_path / "scripts")
    log = tmp_path / "logs" / "sim-0.log"
    try:
        handle = backend.launch(Job("sim-0", [str(exe)], cwd=tmp_path, log_path=log))
        deadline = time.monotonic() + 120
        while not (tmp_path / "printed").exists():
            assert backend.poll(handle) is None, log.read_text() if log.exists() else ""
            assert time.monotonic() < deadline, "the solver never printed"
            time.sleep(0.05)
        assert backend.kill(handle, grace=10, reason="hung: simulation 0 silent") is None
        assert backend.poll(handle) not in (None, 0)
    finally:
        backend.close()
    text = log.read_text()
    assert LINES in text, text
    kill = launcher_said(text)[0]
    said = "killing this job (scancel: SIGTERM, SIGKILL after 10 s): hung: simulation 0 silent"
    assert kill.endswith(said), text
    assert text.index(PREFIX) > text.index(LINES), text
    assert "    | step 2 sent" in log_tail(log) and PREFIX not in log_tail(log), log_tail(log)


#: run by salloc: an srun step printing a line then sleeping, killed with a reason
STEP_DRIVER = """
import json, sys, time
from melissa_trainer.launcher.backends import Job, SlurmBackend

code = "import time; print('step 0 sent', flush=True); time.sleep(300)"
backend = SlurmBackend(mode="srun")
handle = backend.launch(Job("step-hung", [sys.executable, "-c", code], log_path="step.log"))
deadline = time.monotonic() + 60
while "step 0 sent" not in open("step.log").read():
    assert time.monotonic() < deadline, open("step.log").read()
    time.sleep(0.05)
backend.kill(handle, grace=5, reason="hung: simulation 0 silent")
out = {"killed": backend.poll(handle), "log": open("step.log").read()}
backend.close()
print(json.dumps(out))
"""


@pytest.mark.timeout(300)
def test_a_killed_srun_steps_log_says_the_kill(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Mode "srun": `SlurmBackend.kill` with a reason writes its line in the step's log,
    after the solver's lines. Failed before: `kill` took no reason."""
    out, stderr = in_allocation(tmp_path, STEP_DRIVER, 1, timeout=240)
    assert out["killed"] not in (None, 0), stderr
    text = out["log"]
    kill = launcher_said(text)[0]
    said = "killing this job (SIGTERM to its tasks, srun killed after 5 s): hung: simulation 0"
    assert kill.endswith(said + " silent"), text
    assert text.index(PREFIX) > text.index("step 0 sent"), text


#: a solver that says a line, then waits to be killed (a file `printed-<name>` when said)
WAITER = (
    "import sys, time; print('step 0 sent', flush=True); open(sys.argv[1], 'w').close(); "
    "time.sleep(300)"
)
#: `base.CLOSE_REASON`, written out (the oracle: what a user reads in the log)
CLOSED = "the launcher closes its backend (the study ends): every job left is killed"


@pytest.mark.timeout(240)
def test_a_cancelled_batch_jobs_quote_is_the_solvers_and_close_says_its_kill(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two batch jobs that printed a line: one killed, one left to `close`. Failed
    before: the killed one's quote ended with Slurm's ``slurmstepd-vm: error: *** JOB N
    ON vm CANCELLED AT ... ***`` and bash's ``Terminated`` (read as the solver's words;
    its last log line, which groups failures, was ``Terminated``), and `close` cancelled
    the other without the launcher's line in its log."""
    backend = SlurmBackend(poll_every=POLL, time_limit=5, script_dir=tmp_path / "scripts")
    logs = [tmp_path / "logs" / f"sim-{i}.log" for i in range(2)]
    marks = [tmp_path / f"printed-{i}" for i in range(2)]
    try:
        handles = [
            backend.launch(
                Job(f"sim-{i}", [PYTHON, "-c", WAITER, str(marks[i])], cwd=tmp_path, log_path=log)
            )
            for i, log in enumerate(logs)
        ]
        deadline = time.monotonic() + 120
        while not all(mark.exists() for mark in marks):
            for handle, log in zip(handles, logs, strict=True):
                assert backend.poll(handle) is None, log.read_text() if log.exists() else ""
            assert time.monotonic() < deadline, "the solvers never printed"
            time.sleep(0.05)
        assert backend.kill(handles[0], grace=2, reason="hung: simulation 0 silent") is None
        code = finish(backend, handles[0])
    finally:
        backend.close()
    killed, closed = (log.read_text() for log in logs)
    assert "CANCELLED AT" in killed, killed  # (Slurm's line is in the log ...)
    tail = log_tail(logs[0])
    assert tail.splitlines()[-1] == "    | step 0 sent", tail  # (... not in the quote)
    assert "slurmstepd" not in tail and "Terminated" not in tail, tail
    assert last_log_line(logs[0]) == "step 0 sent"
    assert exit_text(code, logs[0]).startswith("exit 143 (SIGTERM"), code  # (the end, apart)
    said = launcher_said(closed)
    assert len(said) == 1, closed  # (one close: one line)
    assert said[0].endswith(f"killing this job (scancel: SIGTERM, SIGKILL after 5 s): {CLOSED}")
    assert closed.index("step 0 sent") < closed.index(PREFIX), closed
    assert "CANCELLED AT" not in closed or closed.rindex(PREFIX) < closed.index("CANCELLED AT")


#: run by salloc: an srun step printing a line then sleeping, left to `close`
STEP_CLOSE_DRIVER = """
import json, sys, time
from melissa_trainer.launcher.backends import Job, SlurmBackend

code = "import time; print('step 0 sent', flush=True); time.sleep(300)"
backend = SlurmBackend(mode="srun")
backend.launch(Job("step-left", [sys.executable, "-c", code], log_path="step.log"))
deadline = time.monotonic() + 60
while "step 0 sent" not in open("step.log").read():
    assert time.monotonic() < deadline, open("step.log").read()
    time.sleep(0.05)
backend.close()
print(json.dumps({"log": open("step.log").read()}))
"""


@pytest.mark.timeout(300)
def test_a_step_left_to_close_gets_the_launchers_line(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Mode "srun": `close` writes the launcher's line, with its reason, in the log of a
    step it kills, after the solver's line. Failed before: no line."""
    out, stderr = in_allocation(tmp_path, STEP_CLOSE_DRIVER, 1, timeout=240)
    text = out["log"]
    said = next(iter(launcher_said(text)), None)
    assert said is not None, (text, stderr)
    assert said.endswith(
        f"killing this job (SIGTERM to its tasks, srun killed after 5 s): {CLOSED}"
    )
    assert text.index(PREFIX) > text.index("step 0 sent"), text
