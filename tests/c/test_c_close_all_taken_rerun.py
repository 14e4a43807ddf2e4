"""The C client's close, as the Python one, confirms from the stop record's
``unfinished`` only the steps this run sent (docs/protocol.md, section 2 "The stop
record"; clients/c/src/stop_record.c; client/stopped.py `StopRecords._taken`): a second
run of a simulation (a solver rerun by hand from its restart file) whose trainer ended
(``end``) before it read that run's steps is not told "nothing was lost" because the
receiver holds as many steps or more of an earlier run. Before, the C close compared
the count alone (``h.steps >= count``) and returned 0 with the warning "having taken
every time step" while every step of this run was lost (review hrev6, finding 1).

Real parts: the receiver's `Ingest` fed the earlier run's HELLO and DATA (the steps it
holds), its record (`build_record`) written into the rendezvous file once the C
solver's first RECEIPT_QUERY came (tests/c/test_c_close_stop_record.py's harness), the
C solver (mt_script) sending steps 10 .. 14. The oracles: the steps fed (none of the
solver's in the first two cases, all of them in the last) and the Python client's words
for the same record and steps, word for word."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import RUN, follow_socket, publish, sink  # noqa: F401

from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.wire import Data, FieldSpec, Hello
from melissa_trainer.wire.receipt import ReceiptQuery

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8
SID, WHOSE = 3, "simulation 3 rank 0"
SENT = range(10, 15)  # (the rerun's steps, from its restart file)
FIELD = FieldSpec("u", np.dtype("<f4"), (4,))
PREFIX = "melissa_trainer: mt_client_close: "


def record_holding(steps: range) -> dict:
    """The record of a receiver (one of one) that took `steps` of simulation SID (its
    HELLO and DATA fed to a real `Ingest`), no BYE, and ended on max_steps."""
    ingest = Ingest(
        0, 1, put=lambda sample: True, end=lambda why: None, expected=None,
        max_field_bytes=1 << 20, max_pending=8, max_pending_bytes=1 << 20,
        max_time_step=1 << 20, recent_size=8,
    )  # fmt: skip
    ingest.hello(Hello(SID, 0, 1, (FIELD,), {}))
    for t in steps:
        payload = np.full(4, t, np.float32).tobytes()
        ingest.data(Data(SID, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 4, payload), True)
    return build_record(ingest, RUN, StopReason("end", "max_steps 9 reached"))


def rerun_close(exe: Path, rv: Path, pull: str, ctx: zmq.Context, record: dict) -> tuple:
    """The C solver's close after it sent `SENT`, its trainer marking the file stopped
    with `record` once the first question came (unanswered): status, message, stderr."""

    def answer(query: ReceiptQuery, before: int) -> None:
        if before == 0:
            entry = json.loads((rv / "rank_0.json").read_text())
            mark_stopped(rv, 0, entry["endpoint"], record)
        return None

    with follow_socket(ctx, answer, gone_after=1) as (follow, asked, _):
        publish(rv, pull, follow)
        script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rv)})
        try:
            sends = [f"send {t} u 1 4 {t}" for t in SENT]
            setup = ("disconnected_timeout 5", "follow_timeout 0.2")
            script.send(f"id {SID}", "field u 1 1 4", *setup, "start", *sends)
            closed = script.send("close")
            lines, err = script.finish()
        finally:
            script.kill()
    assert len(asked) >= 1
    code, _, message = lines[closed][-1].partition(" ")
    return int(code), message.strip(), err


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("held", "older", "taken"),
    [
        (range(10), False, False),  # (the earlier run's 0 .. 9: more held than sent)
        (range(5), False, False),  # (as many held as sent, other steps)
        (SENT, True, False),  # (an older trainer's rows of 3: no first and last)
        (SENT, False, True),  # (this run's own steps: nothing lost)
    ],
)
def test_a_rerun_is_confirmed_only_when_its_own_steps_were_taken(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    held: range,
    older: bool,
    taken: bool,
) -> None:
    rv, record = tmp_path / "rv", record_holding(held)
    if older:
        record["unfinished"] = [row[:3] for row in record["unfinished"]]
    code, message, err = rerun_close(script_exe, rv, sink, zctx, record)
    python = StopRecords(str(rv), [sink], RUN, SID, 0, WHOSE)
    span = (SENT[0], SENT[-1])
    if taken:
        assert (code, message) == (0, ""), (message, err)
        with caplog.at_level(logging.WARNING):
            assert python.decide(0, len(SENT), span) is not None
        (warning,) = [r.getMessage() for r in caplog.records]
        (line,) = [s for s in err.splitlines() if "having taken every" in s]
        assert line == PREFIX + warning  # (the same words)
        return
    assert code == MT_ETIMEDOUT, (message, err)  # (before: 0, "having taken every")
    assert "having taken every" not in err, err
    assert not python.all_taken([len(SENT)], [span])
    with pytest.raises(DeliveryFailed) as caught:
        python.decide(0, len(SENT), span)
    assert message == str(caught.value)  # (the same words)
    # (no count "taken" of steps held out of those sent; an older row's count, as before)
    assert ("lacks this BYE). " in message) != older, message
    assert "is not valid" not in err, err
