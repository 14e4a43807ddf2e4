"""A `ColumnarReservoirBuffer` and the plain `ReservoirBuffer` (the oracle) made and driven
alike, and compared: samples, and their state."""

from __future__ import annotations

import numpy as np

from melissa_trainer.buffers import ColumnarReservoirBuffer, ReservoirBuffer, SampleBlock


def field_sample(rng: np.random.Generator, i: int) -> dict[str, np.ndarray]:
    return {
        "field": rng.random((3, 4)).astype(np.float32),
        "simulation_id": np.array(i % 5, dtype=np.int64),
        "time_step": np.array(i, dtype=np.int64),
        "parameters": rng.random(3),
    }


def assert_same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k])


def assert_same_state(a: ReservoirBuffer, b: ReservoirBuffer) -> None:
    (arrays_a, meta_a), (arrays_b, meta_b) = a.state_dict(), b.state_dict()
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys()
    for k in arrays_a:
        np.testing.assert_array_equal(arrays_a[k], arrays_b[k])
    assert a.stats() == b.stats()


def plain_and_columnar(**kwargs: object) -> tuple[ReservoirBuffer, ColumnarReservoirBuffer]:
    return ReservoirBuffer(50, 8, seed=7, **kwargs), ColumnarReservoirBuffer(
        50, 8, seed=7, **kwargs
    )  # type: ignore[arg-type]


def drive_both(
    plain: ReservoirBuffer, col: ColumnarReservoirBuffer, seed: int, n_ops: int = 400
) -> None:
    """Random puts (single, try_put, lists, blocks) and reads (batches and blocks) on
    both buffers, comparing every result."""
    rng = np.random.default_rng(seed)
    i = 0
    for _ in range(n_ops):
        op = rng.integers(5)
        if op == 0:
            s = field_sample(rng, i)
            assert plain.try_put(s) == col.try_put(s)
            i += 1
        elif op in (1, 2):
            batch = [field_sample(rng, i + j) for j in range(int(rng.integers(1, 30)))]
            items = SampleBlock.from_samples(batch) if op == 2 else batch
            n = plain.put_available(items)
            assert col.put_available(items) == n
            i += n
        elif len(plain) >= 8:
            k = int(rng.integers(1, 9))
            if op == 3:
                a, b = plain.get_block(k, timeout=0), col.get_block(k, timeout=0)
                assert_same_arrays(a.fields, b.fields)
            else:
                for x, y in zip(
                    plain.get_batch(k, timeout=0), col.get_batch(k, timeout=0), strict=True
                ):
                    assert_same_arrays(x, y)
    assert_same_state(plain, col)
