"""The C client's close receipts are capped in all, as the Python client's
(tests/client/test_close_receipt_cap.py, whose rule and words these are):
MT_CLOSE_CAP_FACTOR close timeouts from the close's start, one budget with the delivery
(clients/c/src/close_cap.c). Before, a trainer that ingested a step now and then (a
trickle) kept mt_client_close, and the solver's exit, alive for ever: each step its
receipts showed moved the deadline again.

A real receiver on a FIFO of 2 is drained one sample per answered receipt question
(`drain_slowly`; each "not yet" held 0.5 s): progress all along, but the STEPS take twice
the cap to ingest. The close fails with MT_ETIMEDOUT at the cap, in the Python words
(`delivery.capped_words`, the C setter named). Each step its own DATA (``batching 0
0.02``)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from c_close_runs import c_close_receiver, unbatched_script
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import MT_ETIMEDOUT
from slow_drain import drain_slowly

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.delivery import CLOSE_CAP_FACTOR, capped_words

pytestmark = pytest.mark.e2e  # every test here starts a process

SID = 9
CLOSE_TIMEOUT = 2.0  # (the cap: 20 s; a sample ingested every 0.5 s or so: progress)
STEPS = 80  # (40 s of ingest at least: twice the cap)


@pytest.mark.timeout(180)
def test_a_trickle_of_receipts_fails_the_close_at_the_cap_in_python_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    buffer, taken, closed = FIFOBuffer(2), [], threading.Event()
    rendezvous = tmp_path / "rv"
    with c_close_receiver(rendezvous, buffer) as receiver:
        script = unbatched_script(script_exe, rendezvous, SID, STEPS, CLOSE_TIMEOUT)
        try:
            drainer = drain_slowly(receiver, buffer, taken, closed, STEPS, every=1)  # type: ignore[arg-type]
            done = script.send("close")
            lines, err = script.finish(timeout=150)  # (before: 0, 40 s on)
        finally:
            script.kill()
            closed.set()  # (the rest: taken at once)
        drainer.join(60)
    assert all(lines[n][-1].strip() == "0" for n in lines if n != done), lines  # (its set-up)
    code, _, message = lines[done][-1].partition(" ")
    assert int(code) == MT_ETIMEDOUT, (lines[done], err)
    words = capped_words("close_timeout", CLOSE_TIMEOUT, "mt_set_close_timeout", SID)
    head = (
        f"simulation {SID} rank 0: the trainer did not confirm this simulation's BYE within "
        f"{CLOSE_CAP_FACTOR} x close_timeout={CLOSE_TIMEOUT} s in all: its receivers [0] "
        f"ingested "
    )
    tail = f" of the {STEPS} steps this rank sent them: {words}"
    found = re.fullmatch(re.escape(head) + "([0-9]+)" + re.escape(tail), message.strip())
    assert found is not None, message
    assert 0 < int(found.group(1)) < STEPS, message  # (it progressed; it was not done)
