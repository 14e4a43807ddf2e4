"""`Ingest` fed messages directly: one or several receivers finish whatever the step
numbering, each expecting its share of steps; completed steps cost a bit each, and marking
a range is marking each step; the memoized DATA decoding agrees with `wire.decode`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from receiver_runs import U, _feed, _ingest, data, value

from melissa_trainer import wire as P
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.step_ledger import StepLedger


def test_one_receiver_finishes_whatever_the_step_numbering() -> None:
    ing, samples, ends = _ingest()
    _feed(ing, [P.encode_hello(1, 0, 1, [U])])
    for t in (0, 10, 20):
        _feed(ing, data(1, t, U, value(1, t, U)))
    _feed(ing, [P.encode_bye(1, 0, 1, 3)])
    assert ends and ing.finished_ids == [1] and len(samples) == 3


def test_each_of_several_receivers_expects_its_share_of_steps() -> None:
    for rank in range(3):
        ing, samples, ends = _ingest(rank, 3)
        mine = [t for t in range(7) if t % 3 == rank]
        _feed(ing, [P.encode_hello(1, 0, 1, [U])])
        _feed(ing, [P.encode_bye(1, 0, 1, len(mine))])  # may overtake data (other sockets)
        for t in mine:
            assert not ends
            _feed(ing, data(1, t, U, value(1, t, U)))
        assert ends, rank
        assert [int(s["time_step"]) for s in samples] == mine


def test_several_receivers_finish_whatever_the_step_numbering() -> None:
    """Every tenth step, two receivers: rank 0 gets all (even) steps, rank 1 none. Each
    BYE counts the steps sent to its receiver, so both finish (version 1's count over
    all receivers left both waiting for steps 2, 4... or 1, 3... that never come)."""
    steps = [0, 10, 20, 30]
    for rank, sent in ((0, steps), (1, [])):
        ing, samples, ends = _ingest(rank, 2)
        _feed(ing, [P.encode_hello(1, 0, 1, [U])])
        for t in sent:
            _feed(ing, data(1, t, U, value(1, t, U)))
        assert not ends
        _feed(ing, [P.encode_bye(1, 0, 1, len(sent))])
        assert ends and ing.finished_ids == [1], rank
        assert [int(s["time_step"]) for s in samples] == sent


def test_completed_steps_cost_a_bit_each() -> None:
    ing, _, _ = _ingest(expected=None)
    _feed(ing, [P.encode_hello(1, 0, 1, [U])])
    for t in range(5000):
        _feed(ing, data(1, t, U, value(1, 0, U)))
    assert 5000 / 8 <= len(ing.sims[1].done) <= 2 * 5000 / 8
    state = ing.state_dict()
    assert len(state["simulations"]["1"]["done"]) <= 4 * 2 * 5000 / 8 / 3 + 4


def test_memoized_inline_decoding_agrees_with_protocol_decode() -> None:
    decoder = DataDecoder(1 << 20)
    good = [data(1, t, U, value(1, t, U))[0] for t in range(3)]
    other = data(2, 7, U, value(2, 7, U), rank=1, count=2, start=6, end=12)[0]
    frames = [*good, other, other[:-4], good[0] + b"xx", good[1][:40], b"MTRN" + bytes(60)]
    frames += [P.encode_hello(1, 0, 1, [U]), P.encode_bye(1, 0, 1, 3), *good]
    for frame in frames:
        _assert_decodes_alike(decoder, frame, None)


def test_memoized_two_frame_decoding_agrees_with_protocol_decode() -> None:
    """DATA with a payload frame: a memo hit accepts and rejects exactly what `decode`
    does (wrong payload size, missing or extra frame, bytes after the header, an INLINE
    header of the same key given a payload frame, other fields)."""
    decoder = DataDecoder(1 << 20)

    def two(sim: int, t: int, **kw: Any) -> list[bytes]:
        return data(sim, t, U, value(sim, t, U), inline=False, **kw)

    good = [two(1, t) for t in range(3)]
    inline = data(1, 5, U, value(1, 5, U), inline=True)
    part = two(2, 7, rank=1, count=2, start=6, end=12)
    cases: list[tuple[bytes, Any]] = [(h, p) for h, p in good]
    cases += [(part[0], part[1]), (good[0][0], good[0][1][:-4]), (good[1][0], good[1][1] + b"x")]
    cases += [(good[2][0], None), (good[0][0] + b"xx", good[0][1]), (good[1][0][:-1], good[1][1])]
    cases += [(inline[0], None), (inline[0], good[0][1]), (good[0][0], b"")]
    cases += [(good[0][0][:-1] + b"v", good[0][1]), *((h, p) for h, p in good)]
    for frame, payload in cases:
        _assert_decodes_alike(decoder, frame, payload)


def _assert_decodes_alike(decoder: Any, frame: bytes, payload: bytes | None) -> None:
    """`decoder` accepts `frame` (and `payload`) as `protocol.decode` does, or rejects it
    for the same reason."""
    try:
        want: Any = P.decode(frame, payload, 1 << 20)
    except P.ProtocolError as exc:
        want = exc.reason
    try:
        got: Any = decoder(frame) if payload is None else decoder(frame, payload)
    except P.ProtocolError as exc:
        got = exc.reason
    if isinstance(want, P.Data):
        assert isinstance(got, P.Data) and bytes(got.payload) == bytes(want.payload)
        assert got[:9] == want[:9]
    else:
        assert got == want, (frame, payload)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=50), st.integers(0, 300), st.integers(1, 100))
def test_marking_a_range_is_marking_each_step(marked: list[int], gap: int, n: int) -> None:
    a_rec = StepLedger(1, 1, (U,), {})
    b_rec = StepLedger(1, 1, (U,), {})
    for i in sorted(set(marked)):
        a_rec.mark(i)
        b_rec.mark(i)
    start = a_rec.frontier + gap
    a_rec.mark_range(start, start + n)
    for i in range(start, start + n):
        b_rec.mark(i)
    assert a_rec.done.rstrip(b"\0") == b_rec.done.rstrip(b"\0")
    assert a_rec.completed == b_rec.completed and a_rec.frontier == b_rec.frontier == start + n
    restored = StepLedger.from_state(1, a_rec.to_state())
    assert restored.frontier == a_rec.frontier and restored.completed == a_rec.completed
