"""The exit code of a batch job whose script wrote none (`exit_code.final_code`), read
from Slurm's record: a job squeue listed started that a scancel ended before its script
ran (slurmd had not launched it: ``JobState=CANCELLED ExitCode=1:0``, seen on the test
cluster, test_slurm_ended_by_slurm.py) reads as a cancellation, 143, not exit 1, a
solver's own failure. Failed before: 1 (the CI rehearsal's flake of
test_a_running_job_someone_scancels_is_said_so_and_the_studys_kill_is_not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.backends.slurm.exit_code import CANCELLED_CODE, final_code
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle


class Record:
    """Stands in for `SlurmCommands` where `final_code` asks it: Slurm's record."""

    def __init__(self, record: tuple[str, str] | None) -> None:
        self._record = record

    def record(self, job_id: str) -> tuple[str, str] | None:
        return self._record


@pytest.mark.parametrize(
    ("ran", "record", "state", "code"),
    [
        (True, ("CANCELLED", "1:0"), "RUNNING", CANCELLED_CODE),  # (its script never ran)
        (True, ("CANCELLED", "0:0"), "RUNNING", CANCELLED_CODE),
        (True, None, "CANCELLED", CANCELLED_CODE),  # (no record: squeue's state)
        (True, ("CANCELLED", "0:9"), "RUNNING", 137),  # (a signal said: as it is)
        (False, ("CANCELLED", "0:0"), "PENDING", 1),  # (cancelled queued: as before)
        (True, ("FAILED", "2:0"), "RUNNING", 2),
        (True, ("COMPLETED", "0:0"), "RUNNING", 0),
    ],
)
def test_a_started_job_cancelled_with_no_code_reads_as_a_cancellation(
    tmp_path: Path, ran: bool, record: tuple[str, str] | None, state: str, code: int
) -> None:
    handle = SlurmHandle(
        job=Job("sim-3", ()), job_id="40829771", exit_stem=str(tmp_path / "sim-3"), ran=ran
    )
    handle.state = state
    assert final_code(handle, "sim-3 (Slurm job 40829771)", Record(record)) == code  # type: ignore[arg-type]
    assert CANCELLED_CODE == 143
