"""The C client's close waits on while its receipts show the trainer progress (user trial
htrial24, F1), as the Python client's (tests/client/test_close_progress.py, whose rule
and words these are): ``mt_set_close_timeout`` bounds a wait *without progress*.

A real receiver on a FIFO of 2 is drained one sample per two answered receipt questions
(events: each "not yet" is held by the receiver for `RECEIPT_HOLD`, 0.5 s, so the 10
samples beyond the FIFO take 10 s at least, more than the close timeout of 4 s): before,
the close gave up with MT_ETIMEDOUT ("a trainer paused that long?"); now it returns
MT_OK and every (simulation, step) was received exactly once. A receiver never drained
(no progress) still fails the close at the close timeout, in the Python client's words
with the C setter's names. Each step its own DATA (``batching 0 0.02``: see the Python
test's UNBATCHED)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from c_close_runs import c_close_receiver, unbatched_script
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from slow_drain import drain_slowly

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.receipts import Rounds
from melissa_trainer.client.tuning import ClientTuning

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8
STEPS, SID = 12, 7


@pytest.mark.timeout(180)
def test_the_close_waits_on_while_the_trainer_ingests_slowly(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    buffer, taken, closed = FIFOBuffer(2), [], threading.Event()
    rendezvous = tmp_path / "rv"
    with c_close_receiver(rendezvous, buffer) as receiver:
        script = unbatched_script(script_exe, rendezvous, SID, STEPS, 4.0)
        try:
            drainer = drain_slowly(receiver, buffer, taken, closed, STEPS)  # type: ignore[arg-type]
            done = script.send("close")
            lines, err = script.finish(timeout=150)
        finally:
            script.kill()
        answered = receiver._follow.answered  # type: ignore[union-attr]
        closed.set()
        drainer.join(60)
        finished = SID in receiver.completed()
    assert all(lines[n][-1].strip() == "0" for n in lines if n != done), lines  # (its set-up)
    assert lines[done][-1].strip() == "0", (lines[done], err)  # (before: 8, MT_ETIMEDOUT)
    assert answered > 2 * 4.0 / 0.5, answered  # (longer than the close timeout in all)
    # the invariant: every (simulation, step) received exactly once
    assert sorted(taken) == [(SID, t) for t in range(STEPS)], taken
    assert finished


@pytest.mark.timeout(120)
def test_a_stuck_receiver_fails_the_close_at_the_close_timeout_in_python_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / "rv"
    with c_close_receiver(rendezvous) as receiver:
        script = unbatched_script(script_exe, rendezvous, SID, STEPS, 1.5)
        try:
            done = script.send("close")
            lines, err = script.finish(timeout=100)
        finally:
            script.kill()
        held = int(receiver.ingest.sims[SID].completed)
    assert all(lines[n][-1].strip() == "0" for n in lines if n != done), lines  # (its set-up)
    code, _, message = lines[done][-1].partition(" ")
    assert int(code) == MT_ETIMEDOUT, (lines[done], err)
    assert 0 < held < STEPS, held
    client = SimpleNamespace(
        bye_counts=[STEPS], tuning=ClientTuning(close_timeout=1.5), simulation_id=SID
    )
    python = Rounds(client, [{}], f"simulation {SID} rank 0").unconfirmed([None], [held])  # type: ignore[arg-type]
    assert message.strip() == python.replace(
        "ClientTuning.close_timeout=", "close_timeout="
    ).replace("(ClientTuning.close_timeout;", "(mt_set_close_timeout;"), message
    assert f"{STEPS - held} of the {STEPS} steps this rank sent them not confirmed" in message
