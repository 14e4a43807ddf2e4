"""Every console WARNING of the Slurm backend about a job, and the words of an ended
allocation, fit a terminal of 100 columns (`log_lines.cut`, as the job-log lines and
the Slurm-end WARNINGs already were), rendered here with long realistic values: a
study's job name, an eight-digit job id, a long node name, squeue's reasons, a
StartTime. Failed before: each one line, of (these values) 357 columns held, 587
requeued, 384 requeued held, 196 suspended, 195 held by its state, 208 in an unknown
state, and 382 the ended allocation.
Read back whole (`launcher_said.one_line`), each is the text it was."""

from __future__ import annotations

import datetime
import logging
from pathlib import Path

import pytest
from launcher_said import COLUMNS, one_line, too_long

from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.queued_end import queue_words
from melissa_trainer.launcher.backends.slurm.step_end import allocation_ended

LOGGER = "melissa_trainer.launcher.backends.slurm"
JOB = "sim-1234-r2 (Slurm job 40829771)"
NODE = "gpu-a100-rack17-node0423.cluster.example.org"
SOON = (datetime.datetime.now() + datetime.timedelta(seconds=95)).strftime("%Y-%m-%dT%H:%M:%S")

#: squeue's successive answers (state, reason) and the words each WARNING holds
ANSWERS = {
    "unknown": ([("RESV_DEL_SOMETHING_NEW", None)], "a Slurm state this backend does not know"),
    "suspended": ([("RUNNING", None), ("SUSPENDED", None)], "scontrol resume 40829771"),
    "held state": ([("REQUEUE_HOLD", None)], "scontrol release 40829771"),
    "held": ([("PENDING", "Priority"), ("PENDING", "JobHeldAdmin")], "only an administrator"),
    "requeued held": ([("RUNNING", None), ("PENDING", "JobHeldUser")], "requeuehold"),
    "requeued": ([("RUNNING", None), ("PENDING", "BeginTime")], "cred_expire"),
}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(ANSWERS))
def test_a_queue_warning_fits_100_columns(caplog: pytest.LogCaptureFixture, case: str) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    handle = SlurmHandle(job=Job("sim-1234-r2", ()), job_id="40829771", exit_stem="")
    answers, words = ANSWERS[case]
    for state, reason in answers:
        queue_words(handle, JOB, state, reason, SOON)
        handle.state, handle.reason = state, reason
        handle.ran = handle.ran or state == "RUNNING"
        handle.node = NODE if state == "RUNNING" else handle.node
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert too_long(said[0]) == [], said[0]  # (each line at most 100 columns)
    whole = one_line(said[0])
    assert whole.startswith(f"{JOB} ") and words in whole, whole  # (the prefix kept)
    assert len(whole) > COLUMNS  # (long: it had to be cut)
    if case == "requeued":  # (a number kept with its unit; the node's name whole)
        assert f"on node {NODE} " in whole and "120 s by default" in said[0], said[0]


@pytest.mark.timeout(30)
def test_an_ended_allocations_words_fit_100_columns(tmp_path: Path) -> None:
    log = tmp_path / "sim-1234-r2.log"
    log.write_text("srun: error: Slurm job 40829771 has expired\n")
    said = allocation_ended(Job("sim-1234-r2", ["solver"], log_path=log), 0, "40829771")
    assert said is not None and too_long(said) == [], said
    whole = one_line(said)
    assert whole.startswith("the allocation the simulations' steps run in (Slurm job 40829771)")
    assert whole.endswith("run the trainer again in a new allocation with "
                          "--resume_from_checkpoint latest"), whole  # fmt: skip
