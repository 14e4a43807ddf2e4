"""The C client's close waits on while its delivery phase (the batches queued, the BYE)
sees the trainer take its messages, as the Python client's (tests/client/
test_close_delivery_progress.py, whose rule and words these are): ``mt_set_close_timeout``
bounds that phase *without progress*, not in all.

A real PULL socket (`slow_pull`: RCVHWM 1, a small kernel buffer) reads one message per
tick of its pace; the solver queued 8 MiB of small steps in 32 batches (each batch a copy
ZeroMQ holds without one more, tracked: outbox.c, the close's sign of progress), more
than the kernel holds, so the close waits for many reads, longer than its close timeout
in all. Before, it failed with MT_ETIMEDOUT ("queued messages not delivered within
close_timeout=2 s"); now it returns MT_OK and every (simulation, step) arrived exactly
once. A receiver that reads nothing still fails the close after the close timeout, in
the Python client's words with the C setter's name."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_close_runs import close_while_read, queued_script
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import MT_ETIMEDOUT, Script
from slow_pull import SlowPull, slow_pull

from melissa_trainer.client.delivery import no_progress_words

pytestmark = pytest.mark.e2e  # every test here starts a process

SID, STEPS, COUNT = 6, 2048, 512  # (float64: 4 KiB a step, 64 a batch of 256 KiB)
PACE = 0.25  # s between two reads of the receiver


def queued(exe: Path, receiver: SlowPull, close_timeout: float) -> Script:
    """A solver that queued STEPS steps, batched, for `receiver` (not yet closed)."""
    return queued_script(exe, receiver.endpoint, SID, STEPS, COUNT, "262144 60", close_timeout)


@pytest.mark.timeout(180)
def test_the_close_waits_on_while_the_trainer_takes_its_batches_slowly(
    script_exe: Path,  # noqa: F811
) -> None:
    with slow_pull(PACE) as receiver:
        took = close_while_read(queued(script_exe, receiver, 2.0), receiver)
        keys = list(receiver.keys)
    # (a lower bound set by the receiver's own pace, every read of which came after
    # `began`: longer than the close timeout; deterministic under load)
    assert took > 2.0, took
    assert sorted(keys) == [(SID, t) for t in range(STEPS)], keys[:8]  # each once
    assert [b.steps_sent for b in receiver.byes] == [STEPS]


@pytest.mark.timeout(120)
def test_a_stuck_trainer_fails_the_close_at_the_close_timeout_in_python_words(
    script_exe: Path,  # noqa: F811
) -> None:
    with slow_pull(PACE) as receiver:  # (never started: connected, reads nothing)
        script = queued(script_exe, receiver, 1.5)
        try:
            done = script.send("close")
            code, _, message = script.wait(done)[-1].partition(" ")
        finally:
            script.kill()
    assert int(code) == MT_ETIMEDOUT, message
    assert message.strip() == (
        f"simulation {SID} rank 0: queued messages not delivered within close_timeout=1.5 s "
        f"to ['{receiver.endpoint}']: "
        + no_progress_words("close_timeout", 1.5, "mt_set_close_timeout", SID)
    ), message
