"""Mode "srun", stand-in commands (test_slurm_srun_outage.py's: their srun execs the
task): an srun that says "srun: error: Node failure on n1" and exits 0 (what Slurm
22.05's srun does when a node of its step is lost: `step_end`'s docstring; the real
case on two nodes: test_slurm_srun_two_nodes.py) reports a failure (`LOST_CODE`), said
in a WARNING and in the job's log; an srun that exits 0 without those words, or whose
log has them from an earlier attempt only, reports 0. Failed before: 0 (the step
counted as finished, its missing steps awaited for ever)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from test_slurm_srun_outage import fake  # noqa: F401 - the fixture (stand-in commands)

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.step_end import LOST_CODE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]  # (it starts processes)

LOST = "srun: error: Node failure on n1"


def _end(tmp_path: Path, said: str, earlier: str = "") -> int:
    """The code polled for a step whose task writes `said` to stderr and exits 0, its
    log holding `earlier` before its start."""
    log = tmp_path / "sim-0.log"
    log.write_text(earlier)
    backend = SlurmBackend(mode="srun")
    try:
        job = Job("sim-0", ["bash", "-c", f"echo '{said}' >&2; exit 0"], log_path=log)
        handle = backend.launch(job)
        deadline = time.monotonic() + 30  # (a bound, not a measure)
        while (code := backend.poll(handle)) is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        return code
    finally:
        backend.close()


def test_an_srun_that_lost_its_node_reports_a_failure(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("FAILS", "0")  # (the stand-in srun runs its task at once)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
        code = _end(tmp_path, LOST)
    assert code == LOST_CODE == 1
    said = "ended with the failure of node n1 (srun: 'Node failure on n1'"
    assert said in caplog.text, caplog.text
    log = (tmp_path / "sim-0.log").read_text()
    assert said in log and "--no-kill" in log, log


def test_an_srun_that_exits_0_otherwise_reports_0(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAILS", "0")
    assert _end(tmp_path, "done") == 0
    assert _end(tmp_path, "done", earlier=f"{LOST}\n") == 0  # (an earlier attempt's line)
