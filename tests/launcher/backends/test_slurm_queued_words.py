"""What `queued_end` says of a job that squeue last listed PENDING and that ended
CANCELLED without an exit code: only what is known. It may have started and been
cancelled within one poll, before its script wrote a code, so "never started" is not
claimed (the Slurm cluster's tests: test_slurm_queued_cancel.py)."""

from __future__ import annotations

import datetime

import pytest
from launcher_said import one_line

from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.queued_end import (
    expected_start,
    held_reason,
    queue_words,
    queued_text,
    running_text,
)


@pytest.mark.parametrize("by_study", [True, False])
def test_the_words_say_what_is_known_not_that_it_never_started(by_study: bool) -> None:
    text = queued_text("sim-2 (Slurm job 17)", by_study)
    assert "never started" not in text, text
    assert "cancelled while queued or just as it started" in text, text
    assert "squeue last listed it PENDING; it wrote no exit code" in text, text
    assert "by the study" in text and ("not by the study" in text) is not by_study


def test_a_time_limit_names_where_the_limit_came_from() -> None:
    """The e2e test (test_slurm_ended_by_slurm.py) sets time_limit; without it, the
    partition's DefaultTime ended the job, and the words say so."""
    given = running_text("sim-2 (Slurm job 17)", "TIMEOUT", "00:30:00")
    assert given is not None and "(--time=00:30:00, SlurmBackend's time_limit;" in given
    default = running_text("sim-2 (Slurm job 17)", "TIMEOUT", None)
    assert default is not None and "the partition's DefaultTime" in default
    assert running_text("sim-2 (Slurm job 17)", "FAILED", None) is None


def test_a_hold_is_said_once_per_hold_and_named_with_its_release(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`queue_words` on squeue's successive answers (the cluster's test:
    test_slurm_held.py): a hold said when it comes, not at each answer; the study's own
    cancelled job never."""
    caplog.set_level("WARNING", logger="melissa_trainer.launcher.backends.slurm")
    handle = SlurmHandle(job=Job("sim-2", ()), job_id="17", exit_stem="")
    for state, reason in [("PENDING", "Priority")] + [("PENDING", "JobHeldUser")] * 3:
        queue_words(handle, "sim-2 (Slurm job 17)", state, reason)
        handle.state, handle.reason = state, reason
    said = [one_line(r.getMessage()) for r in caplog.records]
    assert len(said) == 1 and "scontrol release 17" in said[0], said
    assert held_reason("JobHeldAdmin") == (
        "JobHeldAdmin: a hold, it never starts until released (scontrol release JOBID)"
    )
    assert held_reason("Resources") == "Resources"
    handle.cancelled, handle.reason = True, None
    queue_words(handle, "sim-2 (Slurm job 17)", "PENDING", "JobHeldAdmin")
    assert len(caplog.records) == 1


@pytest.mark.parametrize(
    "answers",
    [
        [("RUNNING", None), ("PENDING", "JobHeldAdmin")],
        [("RUNNING", None), ("REQUEUE_HOLD", None), ("PENDING", "JobHeldAdmin")],
    ],
    ids=["requeued-held", "through-REQUEUE_HOLD"],
)
def test_a_requeued_then_held_job_is_said_once(
    caplog: pytest.LogCaptureFixture, answers: list[tuple[str, str | None]]
) -> None:
    """A started job requeued held (scontrol requeuehold): one event, one line that says
    both facts and the release. Failed before: two lines, "put back in Slurm's queue
    ... it runs again from the start when Slurm starts it" (it does not: it is held) and
    "is held in Slurm's queue"; and through REQUEUE_HOLD the hold was said twice."""
    caplog.set_level("WARNING", logger="melissa_trainer.launcher.backends.slurm")
    handle = SlurmHandle(job=Job("sim-2", ()), job_id="17", exit_stem="")
    for state, reason in answers + [answers[-1]] * 2:
        queue_words(handle, "sim-2 (Slurm job 17)", state, reason)
        handle.state, handle.reason = state, reason
        handle.ran = handle.ran or state == "RUNNING"
    said = [one_line(r.getMessage()) for r in caplog.records]
    assert len(said) == 1, said
    assert "scontrol release 17" in said[0], said
    if answers[1][0] == "PENDING":
        assert "put back in Slurm's queue after it started and is held there" in said[0]
        assert "when Slurm starts it" not in said[0], said


def test_a_requeue_says_when_slurm_expects_to_start_the_job_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A requeued job waits for its BeginTime (Slurm holds it until its first run's
    credential expired: 120 s by default): the warning says when squeue expects it to
    start. Failed before: it said "it runs again from the start when Slurm starts it",
    and the job waited, not started and unsaid (a user trial on the two-node cluster)."""
    caplog.set_level("WARNING", logger="melissa_trainer.launcher.backends.slurm")
    start = (datetime.datetime.now() + datetime.timedelta(seconds=100)).strftime(
        "%Y-%m-%dT%H:%M:%S"
    )
    handle = SlurmHandle(job=Job("sim-2", ()), job_id="17", exit_stem="", state="RUNNING")
    handle.ran = True
    queue_words(handle, "sim-2 (Slurm job 17)", "PENDING", "BeginTime", start)
    said = [one_line(r.getMessage()) for r in caplog.records]
    assert len(said) == 1 and "was put back in Slurm's queue after it started" in said[0]
    assert f"; Slurm expects to start it at {start} (squeue's StartTime, in about " in said[0]
    seconds = int(said[0].split("in about ")[1].split(" s")[0])
    assert 90 <= seconds <= 100, said  # (the clock ran a little since)
    assert "until its BeginTime, its first run's credential expired" in said[0], said
    assert expected_start("N/A", "BeginTime") == expected_start(None, None) == ""
    assert "BeginTime" not in expected_start(start, "Priority")
