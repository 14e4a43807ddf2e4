"""Which samples a `ColumnarReservoirBuffer` holds in columns: one that does not fit its
layout, a layout change, columns the system refuses or rows above ``max_row_bytes`` turn
it plain, as the plain `ReservoirBuffer` (the oracle) holds them; `make_buffer` builds it
for a reservoir only."""

from __future__ import annotations

import numpy as np
import pytest
from columnar_pairs import (
    assert_same_arrays,
    assert_same_state,
    drive_both,
    field_sample,
    plain_and_columnar,
)

from melissa_trainer.buffers import (
    BufferConfig,
    ColumnarReservoirBuffer,
    ReservoirBuffer,
    SampleBlock,
    make_buffer,
)


def test_a_sample_that_does_not_fit_turns_it_plain(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="melissa_trainer.buffers.columnar")
    plain, col = plain_and_columnar()
    rng = np.random.default_rng(0)
    drive_both(plain, col, 3, n_ops=100)
    odd = {"field": np.zeros((2, 2), np.float32), "time_step": np.array(1)}
    for b in (plain, col):
        b.put(odd)
    assert not col.columnar
    said = [r.getMessage() for r in caplog.records if "not by column" in r.getMessage()]
    assert len(said) == 1 and "differ from the first" in said[0], said
    drawn = [(plain.get_batch(8), col.get_batch(8)) for _ in range(30)]
    for xs, ys in drawn:
        for x, y in zip(xs, ys, strict=True):
            assert_same_arrays(x, y)
    assert_same_state(plain, col)
    # then the plain path again, blocks included
    block = SampleBlock.from_samples([field_sample(rng, 1000 + i) for i in range(5)])
    assert plain.put_available(block) == col.put_available(block)
    assert_same_state(plain, col)


@pytest.mark.parametrize(
    "odd",
    [
        {"field": np.zeros((3, 4), np.float64)},  # dtype
        {"field": np.zeros((4, 3), np.float32)},  # shape
        {"other": np.zeros((3, 4), np.float32)},  # name
        {"field": [[0.0] * 4] * 3},  # not an array
    ],
)
def test_layout_changes_are_detected(odd: dict) -> None:
    col = ColumnarReservoirBuffer(10, 1, seed=0)
    col.put({"field": np.ones((3, 4), np.float32)})
    assert col.columnar
    col.put(odd)
    assert not col.columnar
    col.close()  # the drain serves each held sample once: both, as they were put
    got = col.get_batch(2)
    assert len(got) == 2 and not col.get_batch(2)
    first = next(
        s
        for s in got
        if "field" in s
        and isinstance(s["field"], np.ndarray)
        and s["field"].dtype == np.float32
        and s["field"].shape == (3, 4)
        and list(s) == ["field"]
        and (s["field"] == 1).all()
    )
    other = got[1] if got[0] is first else got[0]
    assert list(other) == list(odd)
    np.testing.assert_array_equal(
        np.asarray(other[next(iter(odd))]), np.asarray(next(iter(odd.values())))
    )


@pytest.mark.parametrize("as_block", [False, True])
def test_columns_refused_by_the_system_leave_it_plain(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, as_block: bool
) -> None:
    """`capacity` rows allocated at once may be refused (overcommit) where samples one
    by one fit: the buffer then stays plain and takes every sample."""
    import melissa_trainer.buffers.columnar as columnar

    def refuse(*args: object, **kwargs: object) -> None:
        raise MemoryError("refused")

    monkeypatch.setattr(columnar, "_empty", refuse)
    caplog.set_level("INFO", logger="melissa_trainer.buffers.columnar")
    plain, col = plain_and_columnar()
    rng = np.random.default_rng(0)
    batch = [field_sample(rng, i) for i in range(20)]
    items = SampleBlock.from_samples(batch) if as_block else batch
    assert plain.put_available(items) == col.put_available(items) == 20
    assert not col.columnar
    said = [r.getMessage() for r in caplog.records if "not by column" in r.getMessage()]
    assert len(said) == 1 and "refused" in said[0], said
    monkeypatch.undo()
    drive_both(plain, col, 9, n_ops=100)
    assert not col.columnar


@pytest.mark.parametrize("as_block", [False, True])
def test_rows_above_max_row_bytes_are_held_plain_from_the_first(
    caplog: pytest.LogCaptureFixture, as_block: bool
) -> None:
    """A first sample larger than `max_row_bytes` keeps the buffer plain (a choice:
    said at debug level only), which then serves as the plain reservoir does; one of
    exactly that size is stored by column."""
    caplog.set_level("DEBUG", logger="melissa_trainer.buffers.columnar")
    row = 3 * 4 * 4 + 8 + 8 + 3 * 8  # `field_sample`'s bytes: field, two ids, parameters
    rng = np.random.default_rng(0)
    batch = [field_sample(rng, i) for i in range(20)]
    items = SampleBlock.from_samples(batch) if as_block else batch
    fits = ColumnarReservoirBuffer(50, 8, seed=7, max_row_bytes=row)
    assert fits.put_available(items) == 20 and fits.columnar
    plain = ReservoirBuffer(50, 8, seed=7)
    col = ColumnarReservoirBuffer(50, 8, seed=7, max_row_bytes=row - 1)
    assert plain.put_available(items) == col.put_available(items) == 20
    assert not col.columnar
    said = [r for r in caplog.records if "not by column" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "DEBUG", said
    assert f"above max_row_bytes={row - 1}" in said[0].getMessage()
    drive_both(plain, col, 4, n_ops=150)
    assert not col.columnar
    with pytest.raises(ValueError, match="max_row_bytes"):
        ColumnarReservoirBuffer(50, 8, max_row_bytes=0)


def test_make_buffer_builds_it_for_a_reservoir_only() -> None:
    assert (
        type(make_buffer(BufferConfig("reservoir", 10, 1), columnar=True))
        is ColumnarReservoirBuffer
    )
    assert type(make_buffer(BufferConfig("reservoir", 10, 1))) is ReservoirBuffer
    bounded = make_buffer(BufferConfig("reservoir", 10, 1), columnar=True, max_row_bytes=8)
    assert bounded._max_row_bytes == 8  # type: ignore[attr-defined]
    assert type(make_buffer(BufferConfig("fifo", 10, 1), columnar=True)).__name__ == "FIFOBuffer"
