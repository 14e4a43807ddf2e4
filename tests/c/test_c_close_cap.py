"""The C client's close delivery is capped in all, as the Python client's
(tests/client/test_close_cap.py, whose rule and words these are): MT_CLOSE_CAP_FACTOR
close timeouts from the close's start, progress or not. Before, a receiver that took a
message now and then (a trickle) kept mt_client_close, and the solver's exit, alive for
ever: each batch it took moved the deadline again.

A real PULL socket (`slow_pull`: RCVHWM 1, a small kernel buffer) reads one message every
PACE s, five per close timeout (progress all along); the solver queued 80 batches of 256
KiB, more than the cap lets it read. The close fails with MT_ETIMEDOUT in
`delivery.capped_words`, the C setter named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from c_close_runs import queued_script
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import MT_ETIMEDOUT
from slow_pull import slow_pull

from melissa_trainer.client.delivery import CLOSE_CAP_FACTOR, capped_words

pytestmark = pytest.mark.e2e  # every test here starts a process

SID, COUNT = 8, 512  # (float64: 4 KiB a step, 64 a batch of 256 KiB)
STEPS = 64 * 80  # 80 batches: 16 s of reads at least, past the cap (10 s)
PACE = 0.2  # s between two reads of the receiver
CLOSE_TIMEOUT = 1.0
HEADER = Path(__file__).resolve().parents[2] / "clients" / "c" / "include" / "melissa_trainer.h"


def test_the_c_cap_is_the_python_one() -> None:
    found = re.findall(r"^#define MT_CLOSE_CAP_FACTOR\s+([0-9]+)\s*$", HEADER.read_text(), re.M)
    assert found == [str(CLOSE_CAP_FACTOR)], found


@pytest.mark.timeout(180)
def test_a_trickle_fails_the_close_at_the_cap_in_python_words(
    script_exe: Path,  # noqa: F811
) -> None:
    with slow_pull(PACE) as receiver:
        script = queued_script(
            script_exe, receiver.endpoint, SID, STEPS, COUNT, "262144 60", CLOSE_TIMEOUT
        )
        try:
            receiver.start()
            done = script.send("close")
            code, _, message = script.wait(done)[-1].partition(" ")  # (before: 0, 16 s on)
        finally:
            script.kill()
        taken = len(receiver.keys)
    assert int(code) == MT_ETIMEDOUT, message
    assert message.strip() == (
        f"simulation {SID} rank 0: queued messages not delivered within {CLOSE_CAP_FACTOR} x "
        f"close_timeout={CLOSE_TIMEOUT} s in all to ['{receiver.endpoint}']: "
        + capped_words("close_timeout", CLOSE_TIMEOUT, "mt_set_close_timeout", SID)
    ), message
    assert 0 < taken < STEPS, taken  # (it progressed; it was not done)
