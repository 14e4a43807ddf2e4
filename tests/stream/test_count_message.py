"""A simulation's message count and first-message time have one owner,
`StepLedger.count_message`, used by every path of `Ingest` that takes a DATA or a
BATCH (the launcher's heartbeat, `Ingest.activity`, and its exact start-up time,
`Ingest.first_message_at`).

Oracles: a fake clock in `assembly` (a counter, so each reading is distinct and the
first one is known); the messages are written by `reference_protocol` (from the
protocol document, not the library's encoder).
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import numpy as np
import pytest
import reference_protocol as R

from melissa_trainer.buffers import Sample
from melissa_trainer.stream import step_ledger as step_ledger_module
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.wire import Batch, Data, FieldSpec, Hello

SID = 3
U = R.Field("u", "<f8", (4,))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """`time.monotonic` as `step_ledger` sees it: 1.0, 2.0, ...; the list holds the
    readings taken."""
    readings: list[float] = []

    def monotonic() -> float:
        readings.append(float(len(readings) + 1))
        return readings[-1]

    monkeypatch.setattr(step_ledger_module, "time", types.SimpleNamespace(monotonic=monotonic))
    yield readings


def test_count_message_counts_every_call_and_stamps_the_first(clock: list[float]) -> None:
    ledger = StepLedger(SID, 1, (FieldSpec("u", np.dtype("<f8"), (4,)),), {})
    assert (ledger.messages, ledger.first_data_at) == (0, None)
    for _ in range(3):
        ledger.count_message()
    assert ledger.messages == 3
    assert ledger.first_data_at == 1.0 and clock == [1.0]  # the clock read once


def _ingest(put: list[Sample]) -> tuple[Ingest, DataDecoder]:
    def keep(sample: Sample) -> bool:
        put.append(sample)
        return True

    ingest = Ingest(
        0,
        1,
        put=keep,
        end=lambda why: None,
        expected=None,
        max_field_bytes=1 << 20,
        max_pending=64,
        max_pending_bytes=1 << 24,
        max_time_step=8,
        recent_size=64,
    )
    return ingest, DataDecoder(1 << 30)


def _send(ingest: Ingest, decode: DataDecoder, frame: bytes) -> None:
    msg = decode(frame, None)
    if type(msg) is Data:
        ingest.data(msg, True)
    elif type(msg) is Batch:
        ingest.batch(msg)
    else:
        assert type(msg) is Hello
        ingest.hello(msg)


def _data(t: int) -> bytes:
    head = R.part_header(R.DATA, SID, t, 0, 1, U, 0, U.size, True, True)
    return head + np.full(U.size, float(t)).tobytes()


def _batch(steps: list[int]) -> bytes:
    head = R.part_header(R.BATCH, SID, len(steps), 0, 1, U, 0, U.size, False, True)
    return head + b"".join(t.to_bytes(8, "little") + np.full(4, float(t)).tobytes() for t in steps)


def test_every_ingest_path_counts_its_message_once(clock: list[float]) -> None:
    """DATA (put, duplicate, rejected), the usual BATCH and a BATCH out of order each
    count one message; the first message's time is the first clock reading, kept."""
    put: list[Sample] = []
    ingest, decode = _ingest(put)
    _send(ingest, decode, R.encode_hello(SID, 0, 1, R.hello_body([U], {})))
    assert ingest.activity() == {SID: 0} and ingest.first_message_at(SID) is None

    sends = [
        _batch([0, 1]),  # the usual batch (in order, new)
        _data(2),  # a DATA put
        _data(2),  # a duplicate: still a message (the heartbeat)
        _data(9),  # rejected (time step >= max_time_step): still a message
        _batch([5, 3, 4]),  # out of order: the vectorized path (`_batch_any`)
    ]
    for n, frame in enumerate(sends, 1):
        _send(ingest, decode, frame)
        assert ingest.activity() == {SID: n}
    assert ingest.first_message_at(SID) == 1.0 and clock == [1.0]
    assert ingest.duplicates == 1 and ingest.rejected["bad_step"] == 1
    assert ingest.samples_put == 6  # steps 0..5, each once (the oracle that they were taken)
