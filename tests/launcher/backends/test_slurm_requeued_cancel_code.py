"""A batch job that ran, that Slurm requeued, and that a scancel ended while it was
pending again reads exit 143 (`exit_code.CANCELLED_CODE`: a cancellation), as every
scancel of a started job; one cancelled in the queue and never seen started reads 1.
The words of `exit_code` and `queries.exit_code` say so (a docstring said 1 for "a job
cancelled while pending", which a requeued one is not). Stand-in answers: no exit file,
the accounting record's (or, with none, squeue's last) state."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands
from melissa_trainer.launcher.backends.slurm.exit_code import CANCELLED_CODE, final_code
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle


class _Record:
    """`SlurmCommands.record`'s answer, fixed."""

    def __init__(self, record: tuple[str, str] | None) -> None:
        self._record = record

    def record(self, job_id: str) -> tuple[str, str] | None:
        return self._record


@pytest.mark.timeout(30)
@pytest.mark.parametrize("record", [("CANCELLED", "0:0"), ("CANCELLED", "1:0"), None])
def test_a_requeued_job_cancelled_while_pending_reads_a_cancellation(
    tmp_path: Path, record: tuple[str, str] | None
) -> None:
    def code(ran: bool) -> int:
        handle = SlurmHandle(
            job=Job("sim-3-r1", ()),
            job_id="40829771",
            exit_stem=str(tmp_path / "sim-3"),  # (no exit file: its script did not end)
            ran=ran,  # (seen RUNNING before its requeue, or never)
            state="CANCELLED",  # (squeue's last: pending, then cancelled)
        )
        return final_code(
            handle, "sim-3-r1 (Slurm job 40829771)", cast(SlurmCommands, _Record(record))
        )

    assert CANCELLED_CODE == 143
    assert code(ran=True) == 143
    assert code(ran=False) == 1
