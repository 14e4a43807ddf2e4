"""The C client's receipt rounds read the stop record's ``unfinished`` as the Python
client does (clients/c/src/stop_record.c, stop_said.c; client/stopped.py
`StopRecords.decide`): a trainer that ended (``end``) after its first question, having
taken every step the solver sent but not its BYE, confirms the close with one warning
on stderr; one that took fewer fails it (MT_ETIMEDOUT) saying how many of those sent
it took. Before, both failed "not needed, and not taken".

The oracle: the Python client's words for the same record and counts, word for word
(tests/c/test_c_close_stop_record.py's harness: a follow socket played by the test, the
file marked stopped once the first question came)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import RUN, STEPS, sink  # noqa: F401
from test_c_close_stop_record import ingest, stopped_close

from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.stop_record import StopReason, build_record

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8
SID, WHOSE = 3, "simulation 3 rank 0"  # (the script's: test_c_close_receipt.close_status)
PREFIX = "melissa_trainer: mt_client_close: "


def held(steps: int) -> dict:
    """A record of a run ended on max_steps holding `steps` of simulation SID, no BYE."""
    state = ingest({}, {SID: {}})
    state.sims[SID].completed = steps  # (steps 0 .. steps - 1)
    state.sims[SID].done = bytearray(np.packbits(np.ones(steps, bool), bitorder="little"))
    return build_record(state, RUN, StopReason("end", "max_steps 7 reached"))


@pytest.mark.timeout(120)
def test_the_c_receipts_say_what_the_python_ones_say(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rv = tmp_path / "all"
    code, message, err = stopped_close(script_exe, rv, sink, zctx, held(STEPS))
    assert (code, message) == (0, ""), (message, err)  # (before: MT_ETIMEDOUT)
    python = StopRecords(str(rv), [sink], RUN, SID, 0, WHOSE)
    with caplog.at_level(logging.WARNING):
        assert python.decide(0, STEPS, (0, STEPS - 1)) is not None
    (warning,) = [r.getMessage() for r in caplog.records]
    (line,) = [s for s in err.splitlines() if "having taken every" in s]
    assert line == PREFIX + warning  # (the same words)

    rv = tmp_path / "fewer"
    code, message, err = stopped_close(script_exe, rv, sink, zctx, held(STEPS - 2))
    assert code == MT_ETIMEDOUT, message
    assert f"it had taken 1 of the {STEPS} time steps this simulation sent it" in message
    with pytest.raises(DeliveryFailed) as caught:
        StopRecords(str(rv), [sink], RUN, SID, 0, WHOSE).decide(0, STEPS, (0, STEPS - 1))
    assert message == str(caught.value)  # (the same words)
