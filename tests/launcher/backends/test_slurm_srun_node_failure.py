"""Mode "srun", stand-in commands (test_slurm_srun_outage.py's: their srun execs the
task): an srun that says "srun: error: Node failure on n1" and exits 0 (what Slurm
22.05's srun does when a node of its step is lost: `step_end`'s docstring; the real
case on two nodes: test_slurm_srun_two_nodes.py) reports a failure (`LOST_CODE`), said
in a WARNING and in the job's log; an srun that exits 0 without those words, or whose
log has them from an earlier attempt only, reports 0. Failed before: 0 (the step
counted as finished, its missing steps awaited for ever).

An srun that says "srun: error: Slurm job 77 has expired" (77: the allocation's, the
stand-ins' SLURM_JOB_ID) and exits 1 is a failed attempt, and every later launch is a
LaunchError saying the allocation has ended (`step_end.allocation_ended`); another job's
id in those words is not this allocation's end. Failed before: the launches went on, each
failing the same way."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from launcher_said import one_line, said_in_log
from test_slurm_srun_outage import fake  # noqa: F401 - the fixture (stand-in commands)

from melissa_trainer.launcher.backends import Job, LaunchError, SlurmBackend
from melissa_trainer.launcher.backends.slurm.step_end import LOST_CODE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]  # (it starts processes)

LOST = "srun: error: Node failure on n1"


def _poll(backend: SlurmBackend, job: Job) -> int:
    """Launch `job` and poll it to its end: its code."""
    handle = backend.launch(job)
    deadline = time.monotonic() + 30  # (a bound, not a measure)
    while (code := backend.poll(handle)) is None:
        assert time.monotonic() < deadline, Path(str(job.log_path)).read_text()
        time.sleep(0.02)
    return code


def _end(tmp_path: Path, said: str, earlier: str = "") -> int:
    """The code polled for a step whose task writes `said` to stderr and exits 0, its
    log holding `earlier` before its start."""
    log = tmp_path / "sim-0.log"
    log.write_text(earlier)
    backend = SlurmBackend(mode="srun")
    try:
        return _poll(
            backend, Job("sim-0", ["bash", "-c", f"echo '{said}' >&2; exit 0"], log_path=log)
        )
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
    assert said in one_line(caplog.text), caplog.text  # (cut at 100 columns)
    text = (tmp_path / "sim-0.log").read_text()
    log = "\n".join(said_in_log(text))  # (the launcher's lines, each read back whole)
    assert said in log and "--no-kill" in log, text


def test_an_srun_that_exits_0_otherwise_reports_0(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAILS", "0")
    assert _end(tmp_path, "done") == 0
    assert _end(tmp_path, "done", earlier=f"{LOST}\n") == 0  # (an earlier attempt's line)


@pytest.mark.parametrize("job_id", ["77", "78"])
def test_an_expired_allocation_refuses_every_later_step(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    job_id: str,
) -> None:
    monkeypatch.setenv("FAILS", "0")
    expired = f"srun: error: Slurm job {job_id} has expired"
    backend = SlurmBackend(mode="srun")
    try:
        log = tmp_path / "sim-0.log"
        argv = ["bash", "-c", f"echo '{expired}' >&2; exit 1"]
        assert _poll(backend, Job("sim-0", argv, log_path=log)) == 1  # (a failed attempt)
        again = Job("sim-0-r1", ["true"], log_path=tmp_path / "sim-0-r1.log")
        if job_id != "77":  # (not the allocation the steps run in: no end of it)
            assert _poll(backend, again) == 0
            return
        with pytest.raises(LaunchError) as refused:
            backend.launch(again)
        said = str(refused.value)
        assert said.startswith("the allocation the simulations' steps run in (Slurm job 77)")
        assert "--no-kill" in said and "--resume_from_checkpoint latest" in said, said
        assert not (tmp_path / "sim-0-r1.log").exists()  # (nothing started)
    finally:
        backend.close()
