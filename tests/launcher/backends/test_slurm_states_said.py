"""Slurm's ends and waits said in words, against stand-in commands (test_slurm_stand_ins.py's
`fake_slurm`, whose squeue prints what the test writes): states the one-node test
cluster cannot produce at will (NODE_FAIL, an unknown state; PREEMPTED it can:
test_slurm_preempted.py). A running job that Slurm ends by a preemption
(PREEMPTED) or its node's failure (NODE_FAIL) is said in a WARNING and in its log, as a
time limit is (test_slurm_ended_by_slurm.py); a state this backend does not know is said
once, not taken for an end. Failed before: no warning (a preempted job read only as its
exit code; an unknown state was waited on silently); then, said in one line of ~450
characters in the log and on the console."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from launcher_said import one_line, said_in_log, too_long
from slurm_jobs import finish
from test_slurm_stand_ins import fake_slurm  # noqa: F401 - the fixture

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.queued_end import running_text

pytestmark = pytest.mark.e2e  # it starts processes (the stand-ins)

LOGGER = "melissa_trainer.launcher.backends.slurm"


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    ("final", "words"),
    [("PREEMPTED", "was preempted (squeue: PREEMPTED)"), ("NODE_FAIL", "its node's failure")],
)
@pytest.mark.timeout(60)
def test_a_preempted_or_node_failed_job_is_said_so(
    fake_slurm: Path,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    final: str,
    words: str,
) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path, lease_timeout=None)
    log = tmp_path / "sim-0.log"
    handle = backend.launch(Job("sim-0", [sys.executable, "-V"], cwd=tmp_path, log_path=log))
    try:
        (fake_slurm / "state").write_text("4242|RUNNING|None\n")
        assert backend.poll(handle) is None and backend.started(handle)
        (fake_slurm / "state").write_text(f"4242|{final}|None\n")
        code = finish(backend, handle, timeout=30)
    finally:
        backend.close()
    assert code != 0
    warned = [m for m in _said(caplog) if words in one_line(m)]
    assert len(warned) == 1, _said(caplog)
    said = one_line(warned[0])
    assert said.startswith("sim-0 (Slurm job 4242) "), said
    # in lines of at most 100 columns, in the log as on the console (before: one line of
    # ~450 characters in each)
    text = log.read_text()
    assert too_long(text) == [] and too_long(warned[0]) == [], (text, warned)
    assert said_in_log(text)[-1].split(": ", 1)[1] == said, text


@pytest.mark.timeout(60)
def test_an_unknown_state_is_said_once_and_waited_on(
    fake_slurm: Path,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path, lease_timeout=None)
    handle = backend.launch(Job("sim-0", [sys.executable, "-V"], cwd=tmp_path))
    try:
        (fake_slurm / "state").write_text("4242|RUNNING|None\n")
        assert backend.poll(handle) is None
        (fake_slurm / "state").write_text("4242|NEW_STATE|Whatever\n")
        for _ in range(3):
            assert backend.poll(handle) is None  # (alive: not guessed ended)
        (fake_slurm / "state").write_text("4242|COMPLETED|None\n")
        assert finish(backend, handle, timeout=30) == 0
    finally:
        backend.close()
    said = [one_line(m) for m in _said(caplog) if "does not know" in one_line(m)]
    assert said == [
        "sim-0 (Slurm job 4242) is in a Slurm state this backend does not know (squeue: "
        "NEW_STATE): it counts as alive and not started, and the study waits for it; "
        "scancel 4242 to give it up"
    ], _said(caplog)


def test_the_solvers_own_end_is_not_said() -> None:
    for final in ("FAILED", "COMPLETED", "OUT_OF_MEMORY"):
        assert running_text("sim-2 (Slurm job 17)", final, None) is None
