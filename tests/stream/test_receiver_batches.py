"""BATCH messages: whole fields become samples exactly once, records that need assembly or
checks go one by one, two receivers take their steps of a batch, the framing is
validated, batches take the same path to the buffer as records one by one, and a large
batch read in its frame gives what a copy gives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import drain, running
from receiver_runs import U, _feed, _ingest, batch, check_stream, data, pushes, send, tel, value

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer, Sample
from melissa_trainer.buffers.block import SHARED_ROWS, SMALL_ROW_BYTES
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


@pytest.mark.timeout(30)
def test_batches_of_whole_fields_become_samples_exactly_once() -> None:
    buf = FIFOBuffer(100)
    with running(buf, expected_simulations=1) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U], {"a": 2.0})])
        send(s, batch(1, list(range(10)), U))
        send(s, batch(1, list(range(5, 15)), U))  # a restart re-sends 5..9
        send(s, [P.encode_bye(1, 0, 1, 15)])
        samples = drain(buf)
    check_stream(samples, {1: (range(15), [U], {"a": 2.0})})
    assert tel(rec, "duplicates") == 5 and tel(rec, "samples_put") == 15
    assert tel(rec, "messages") == 4 and tel(rec, "rejected") == 0
    for s_ in samples:  # each sample owns its memory: aligned, writable, not a view
        assert s_["u"].flags.owndata or s_["u"].base.flags.owndata
        assert s_["u"].flags.writeable and s_["u"].flags.aligned
        assert s_["u"].base is None or s_["u"].base.nbytes == s_["u"].nbytes


@pytest.mark.timeout(30)
def test_batches_that_need_assembly_or_checks_go_record_by_record() -> None:
    V = P.FieldSpec("v", np.dtype("<i8"), (5,))
    buf = FIFOBuffer(100)
    with (
        running(buf, expected_simulations=2, max_time_step=100, fields=None) as rec,
        pushes(rec.endpoint) as (s,),
    ):
        send(s, [P.encode_hello(1, 0, 1, [U, V])])  # two fields: assembled
        send(s, batch(1, [0, 1, 2], U))
        send(s, batch(1, [2, 1, 0], V))
        send(s, [P.encode_bye(1, 0, 1, 3)])
        send(s, [P.encode_hello(2, 0, 2, [U])])  # two client ranks, a part each
        send(s, batch(2, [0, 1], U, 0, 5, count=2))
        send(s, batch(2, [1, 0, 0], U, 5, 12, rank=1, count=2))  # step 0 twice
        send(s, batch(2, [3, 100], U, 0, 5, count=2))  # 100 >= max_time_step: that one only
        send(s, batch(2, [3], U, 5, 12, rank=1, count=2))
        send(s, batch(2, [4], U, 0, 12, rank=1, count=2, records=2))  # claims 2 records
        send(s, [P.encode_bye(2, 0, 2, 3)])
        send(s, [P.encode_bye(2, 1, 2, 3)])
        samples = drain(buf)
    check_stream(samples, {1: (range(3), [U, V], {}), 2: ([0, 1, 3], [U], {})})
    assert tel(rec, "rejected_bad_step") == 1 and tel(rec, "rejected_bad_size") == 1
    assert tel(rec, "duplicates") == 1 and tel(rec, "rejected") == 2


@pytest.mark.timeout(30)
def test_two_receivers_take_their_steps_of_a_batch_and_reject_the_others() -> None:
    bufs = [FIFOBuffer(100), FIFOBuffer(100)]
    recs = [Receiver(b, r, 2, ReceiverConfig(expected_simulations=1)) for r, b in enumerate(bufs)]
    for r in recs:
        r.start()
    try:
        with pushes(recs[0].endpoint) as (s0,), pushes(recs[1].endpoint) as (s1,):
            for sock in (s0, s1):
                send(sock, [P.encode_hello(1, 0, 1, [U])])
            send(s0, batch(1, [0, 2, 4], U))
            send(s1, batch(1, [1, 3, 4], U))  # 4 belongs to receiver 0
            send(s0, [P.encode_bye(1, 0, 1, 3)])  # the steps sent to each receiver
            send(s1, [P.encode_bye(1, 0, 1, 2)])
            got = [drain(b) for b in bufs]
        assert sorted(int(x["time_step"]) for x in got[0]) == [0, 2, 4]
        assert sorted(int(x["time_step"]) for x in got[1]) == [1, 3]
        assert tel(recs[1], "rejected_wrong_receiver") == 1
    finally:
        for r in recs:
            r.stop()


def test_batch_framing_is_validated() -> None:
    frame = batch(1, [3, 4], U)[0]
    msg = P.decode(frame)
    assert isinstance(msg, P.Batch) and msg.records == 2 and msg.steps.tolist() == [3, 4]
    assert msg.payloads.shape == (2, 12)
    assert msg.record(1).time_step == 4
    for bad, reason in (
        (frame[:-1], "bad_size"),
        (frame + b"\0", "bad_size"),
        (batch(1, [], U)[0], "bad_size"),
        (batch(1, [1], U, records=0)[0], "bad_size"),
    ):
        with pytest.raises(P.ProtocolError) as err:
            P.decode(bad)
        assert err.value.reason == reason
    with pytest.raises(P.ProtocolError) as err:
        P.decode(frame, b"extra")
    assert err.value.reason == "unexpected_frame"


def _sample_key(s: Sample) -> tuple[int, int, bytes, float]:
    return (int(s["simulation_id"]), int(s["time_step"]), s["u"].tobytes(), *s["parameters"])


@pytest.mark.parametrize("world", [1, 3])
def test_batches_take_the_same_path_to_the_buffer_as_records_one_by_one(world: int) -> None:
    """Random batches (in order, re-sent after a restart, shuffled, with steps of other
    receivers or repeated) put the same samples, count the same duplicates and rejects
    and leave the same dedup record as the same records sent one DATA at a time."""
    rng = np.random.default_rng(world)
    for trial in range(40):
        rank = trial % world
        via_batch, got_b, _ = _ingest(rank, world, expected=None, max_time_step=400)
        one_by_one, got_d, _ = _ingest(rank, world, expected=None, max_time_step=400)
        hello = [P.encode_hello(7, 0, 1, [U], {"a": 1.5, "b": -2.0})]
        _feed(via_batch, hello)
        _feed(one_by_one, hello)
        nxt = rank
        for _ in range(12):
            kind = rng.integers(5)
            k = int(rng.integers(1, 40))
            if kind <= 1:  # what a client sends: this receiver's next steps, in order
                steps = list(range(nxt, nxt + k * world, world))
            elif kind == 2:  # a restarted client: from an earlier step again
                start = rank + world * int(rng.integers(0, max(1, nxt // world + 1)))
                steps = list(range(start, start + k * world, world))
            elif kind == 3:  # any order, possibly other receivers' steps or out of range
                steps = rng.permutation(int(rng.integers(k, 420)))[:k].tolist()
            else:  # a step twice in one batch
                steps = [nxt, nxt + world, nxt]
            nxt = max(nxt, max(steps) + world) if kind <= 2 else nxt
            nxt += (rank - nxt) % world
            via_batch.batch(P.decode(batch(7, steps, U)[0]))
            for t in steps:
                _feed(one_by_one, data(7, t, U, value(7, t, U)))
        assert [_sample_key(x) for x in got_b] == [_sample_key(x) for x in got_d]
        for a, b in ((via_batch, one_by_one),):
            assert a.telemetry() | {"messages": 0} == b.telemetry() | {"messages": 0}
            ra, rb = a.sims[7], b.sims[7]
            assert ra.done.rstrip(b"\0") == rb.done.rstrip(b"\0")
            assert ra.completed == rb.completed == len(got_b)
            # the same last keys, in order; the batches' list may hold more (it grows
            # to hold a whole message's keys with the puts a checkpoint may lack:
            # `IngestState.keep_recent`)
            kept, held = list(b.recent), list(a.recent)
            assert len(held) >= len(kept) and held[len(held) - len(kept) :] == kept
        for x in got_b:
            assert x["time_step"].shape == x["simulation_id"].shape == ()
            assert x["time_step"].dtype == x["simulation_id"].dtype == np.int64
            assert x["parameters"].dtype == np.float64
            memory: Any = x["u"]  # its own memory, not a piece of a received frame:
            while isinstance(memory, np.ndarray) and memory.base is not None:
                memory = memory.base  # a row of its own, or one of a few small rows
            shared = SHARED_ROWS * SMALL_ROW_BYTES
            nbytes = memoryview(memory).nbytes
            assert nbytes == x["u"].nbytes or nbytes <= shared
    x, y = got_b[0], got_b[1]
    x["time_step"] += 1000  # a sample's entries are its own, even where memory is shared
    x["parameters"][:] = 0
    assert int(y["time_step"]) < 1000 and y["parameters"].tolist() == [1.5, -2.0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("in_place", [True, False])
def test_a_large_batch_read_in_its_frame_gives_what_a_copy_gives(
    in_place: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BATCH of at least `data_path._VIEW_MIN` bytes is read in the frame's memory, not
    copied into bytes first: the same samples (owning their memory), the same verdicts
    on malformed ones (rejected, counted, named by their simulation), either way."""
    from melissa_trainer.stream import data_path

    monkeypatch.setattr(data_path, "_VIEW_MIN", 64 if in_place else 1 << 40)
    big = batch(1, list(range(200)), U)[0]  # 200 x (8 + 48) bytes: above 4096
    assert len(big) >= 4096
    buf = FIFOBuffer(1000)
    with running(buf, expected_simulations=1) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U], {"a": 2.0})])
        send(s, [big[:-1]])  # truncated: rejected, never decoded as records
        send(s, [batch(1, list(range(200, 300)), U, records=101)[0]])  # one record short
        send(s, [big])
        send(s, batch(1, list(range(150, 300)), U))  # a restart re-sends 150..199
        send(s, [P.encode_bye(1, 0, 1, 300)])
        samples = drain(buf)
    check_stream(samples, {1: (range(300), [U], {"a": 2.0})})
    assert tel(rec, "rejected_bad_size") == 2 and tel(rec, "rejected") == 2
    assert tel(rec, "duplicates") == 50 and tel(rec, "samples_put") == 300
    for s_ in samples:  # each sample owns its memory: not a view of a frame
        assert s_["u"].flags.writeable and s_["u"].flags.aligned
        assert s_["u"].base is None or s_["u"].base.nbytes == s_["u"].nbytes
