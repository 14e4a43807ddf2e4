"""A resume is exact or refused: the receiver record's correction (`ingest_record`'s
`_forget_after`) never guesses.

The trainer writes the buffer's snapshot first, then the receiver's record; the resume
forgets the last ``marked - buffer_put`` keys the record kept (those recorded after the
buffer's snapshot), so that their steps are taken again when re-sent. Within one
checkpoint the gap is bounded: a pump's overflow (one message, marked, not put) at the
buffer's snapshot, then at most the buffer's room of puts (its capacity: a reservoir
whose samples were all drawn), then one message blocked in its put when the record is
taken. The first test drives that worst case and checks, against the order the steps
were put in, that exactly those the buffer's snapshot lacks are forgotten. A gap beyond
the keys kept (or a buffer ahead of the record) is files of different saves: the resume
was only warned of ("some samples may be lost or seen twice") and went on; it is
refused now, saying why and what to do (the other tests).
"""

from __future__ import annotations

import numpy as np
import pytest
from small_ingest import small_ingest

from melissa_trainer.buffers import Sample
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.reshard import reshard_states
from melissa_trainer.wire import Batch, Data, FieldSpec, Hello

pytestmark = pytest.mark.timeout(60)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))
CAPACITY = 1000  # the buffer's; the receiver keeps CAPACITY + 16 keys (`IngestLoop`)
MESSAGE = 300  # the largest message's samples (a BATCH)


def hello(sid: int) -> Hello:
    return Hello(sid, 0, 1, (FIELD,), {"a": float(sid)})


def data(sid: int, t: int) -> Data:
    payload = np.array([sid, t], np.float32).tobytes()
    return Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)


def batch(sid: int, first: int, n: int) -> Batch:
    steps = np.arange(first, first + n, dtype=np.uint64)
    payloads = np.array([[sid, t] for t in range(first, first + n)], np.float32)
    return Batch(sid, n, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, steps, payloads)


def done_steps(ingest: Ingest, sid: int) -> list[int]:
    rec = ingest.sims[sid]
    bits = np.unpackbits(np.frombuffer(bytes(rec.done), np.uint8), bitorder="little")
    return np.flatnonzero(bits).tolist()


def test_the_worst_gap_within_one_checkpoint_is_forgotten_exactly() -> None:
    puts: list[int] = []  # the steps, in the order the ingest handed them to the buffer
    record: dict[str, object] = {}
    blocked_at = [-1]

    def put(sample: Sample) -> bool:
        puts.append(int(sample["time_step"]))
        if len(puts) == blocked_at[0]:  # the put blocks on the full buffer: the
            record.update(ingest.state_dict())  # ingester takes the record there
        return True

    ingest = small_ingest(put=put, max_pending=4, recent_size=CAPACITY + 16)
    ingest.hello(hello(1))
    for t in range(50):
        ingest.data(data(1, t), True)
    ingest.batch(batch(1, 50, MESSAGE))  # a pump's: waits whole in the overflow
    buffer_put = len(puts) - MESSAGE  # the buffer's snapshot, without it
    # the buffer's whole room (every sample drawn) is put after the snapshot: the
    # overflow first, then new steps one by one
    t = 50 + MESSAGE
    while len(puts) < buffer_put + CAPACITY:
        ingest.data(data(1, t), True)
        t += 1
    blocked_at[0] = len(puts) + 1  # the next BATCH blocks on its first sample's put
    ingest.batch(batch(1, t, MESSAGE))
    assert record, "the record was taken in the blocked put"
    assert record["marked"] - buffer_put == CAPACITY + MESSAGE  # the worst gap

    resumed = small_ingest(recent_size=CAPACITY + 16)
    resumed.load_state_dict(record, buffer_put)  # no refusal
    assert done_steps(resumed, 1) == sorted(puts[:buffer_put])  # exactly the buffer's
    assert resumed.marked == buffer_put


def record_with_gap(recent_size: int, steps: int) -> dict[str, object]:
    ingest = small_ingest(recent_size=recent_size)
    ingest.hello(hello(3))
    for t in range(steps):
        ingest.data(data(3, t), True)
    return ingest.state_dict()


def test_a_record_further_ahead_than_its_kept_keys_is_refused() -> None:
    state = record_with_gap(8, 20)  # 20 samples marked, the last 8 keys kept
    with pytest.raises(ValueError) as info:
        small_ingest(recent_size=8).load_state_dict(state, 20 - 9)  # 9 behind
    said = str(info.value)
    assert "cannot resume exactly" in said and "rank 0" in said
    assert "9 samples recorded after the buffer's snapshot" in said and "8 keys" in said
    assert "resume from a checkpoint written whole" in said
    small_ingest(recent_size=8).load_state_dict(state, 20 - 8)  # 8 behind: exact


def test_a_buffer_ahead_of_the_record_is_refused() -> None:
    state = record_with_gap(8, 5)
    with pytest.raises(ValueError, match="the buffer holds 2 puts more than the record took"):
        small_ingest(recent_size=8).load_state_dict(state, 7)


def test_a_reshard_refuses_an_old_ranks_record_beyond_its_keys() -> None:
    state = record_with_gap(4, 10)
    with pytest.raises(ValueError, match="cannot resume exactly"):
        reshard_states([state], [0], 0, 2, 0)
