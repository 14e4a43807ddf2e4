"""The C client's close behind a queue of small steps sent unbatched sees the trainer
take them, as the Python client's (tests/client/test_close_unbatched_progress.py, whose
rule this is): the marks among the DATA sent alone with a copy (``mt_mark_due``: one in
``MT_MARK_EVERY`` of these 56 KB steps) are tracked (clients/c/src/send.c,
``c->marks_flying``), so their release is progress.

Before, ZeroMQ copied each and let go of it without a sign: mt_client_close saw nothing
from the BYE's acceptance to its release and failed with MT_ETIMEDOUT ("queued messages
not delivered within close_timeout=2.0 s ... took none of them") though the trainer was
reading. A real PULL socket (`slow_pull`) reads one message every PACE s; the solver
(batching off) queued STEPS steps of 56 KB, more than the kernel holds. The close
returns MT_OK, and every (simulation, step) arrived exactly once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from c_close_runs import close_while_read, queued_script
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from slow_pull import slow_pull

from melissa_trainer.client.marks import MARK_BYTES, MARK_EVERY, MARK_MOST

pytestmark = pytest.mark.e2e  # every test here starts a process

SID, STEPS, COUNT = 10, 300, 7000  # (float64: 56 KB a step, one frame, copied)
PACE = 0.05  # s between two reads: 15 s for all, a sign every MARK_EVERY reads (0.8 s)
CLOSE_TIMEOUT = 2.0
INTERNAL = Path(__file__).resolve().parents[2] / "clients" / "c" / "src" / "internal.h"


def test_the_c_marks_are_the_python_ones() -> None:
    text = INTERNAL.read_text()
    for name, value in (("EVERY", MARK_EVERY), ("BYTES", MARK_BYTES), ("MOST", MARK_MOST)):
        found = re.findall(rf"^#define MT_MARK_{name}\s+([0-9]+)u\s*$", text, re.M)
        assert found == [str(value)], (name, found)


@pytest.mark.timeout(180)
def test_the_close_waits_while_the_trainer_reads_small_unbatched_steps(
    script_exe: Path,  # noqa: F811
) -> None:
    assert MARK_EVERY * PACE < CLOSE_TIMEOUT / 2
    assert MARK_EVERY * COUNT * 8 >= MARK_BYTES  # (so one in MARK_EVERY is a mark)
    with slow_pull(PACE) as receiver:
        script = queued_script(
            script_exe, receiver.endpoint, SID, STEPS, COUNT, "0 0", CLOSE_TIMEOUT
        )
        took = close_while_read(script, receiver)
        keys = list(receiver.keys)
    assert took > CLOSE_TIMEOUT, took  # (set by the receiver's pace)
    assert sorted(keys) == [(SID, t) for t in range(STEPS)], keys[:8]  # each once
    assert [b.steps_sent for b in receiver.byes] == [STEPS]
