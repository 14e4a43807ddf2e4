"""The reduction's shortcuts (issue 46's ninth round: its CPU on the training thread) give
the plain paths' values bit for bit:

* `sum_per_row`: a period's sums per simulation counted straight into the statistics'
  rows (when they hold a range of ids), against `sum_per_id`, the plain path;
* `SimulationLosses.reduce` through it, and with the reference's total taken over every
  sum when all are finite, against the same reductions through the plain path
  (`sum_per_row` declining every period: `sum_per_id`, `_rows_of`, the masked total);
* `losses_of`: micro-batches of one dtype and several sample shapes (the concatenation
  refused, then runs), against each step's own per-sample losses.

Bit for bit (`float.hex`, the arrays' bytes): the sampler is steered by these numbers.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from melissa_trainer.core import loss_per_simulation
from melissa_trainer.core.loss_per_simulation import SimulationLosses
from melissa_trainer.core.loss_sums import sum_per_id, sum_per_row
from melissa_trainer.core.sample_losses import (
    deferred_sample_losses,
    losses_of,
    step_sample_losses,
)

pytestmark = pytest.mark.timeout(120)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """The same dtype, shape and bytes (NaNs and signed zeros included)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def random_case(rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """A period's ids and values, and a table's (low, count) holding them all."""
    kind = k % 6
    n = int(rng.integers(1, 700))
    low = int(rng.choice([0, 1, 37, 10**6]))
    count = int(rng.integers(1, 80))
    if kind == 0:  # one id, many times (ties only)
        ids = np.full(n, low + int(rng.integers(0, count)))
    elif kind == 1:  # every id of the table, some many times
        ids = rng.integers(low, low + count, n)
    elif kind == 2:  # a few ids of a wide table: most rows absent
        few = rng.choice(np.arange(low, low + count), min(count, 3), replace=False)
        ids = rng.choice(few, n)
    elif kind == 3:  # the table's ends only
        ids = rng.choice([low, low + count - 1], n)
    elif kind == 4:  # one sample
        ids = np.array([low + count - 1])
    else:  # every row once, shuffled
        ids = rng.permutation(np.arange(low, low + count))
    ids = ids.astype(np.int64)
    dtype = np.float32 if k % 2 else np.float64
    values = (rng.standard_normal(len(ids)) * 10.0 ** rng.integers(-12, 12, len(ids))).astype(dtype)
    if k % 7 == 0:
        values[int(rng.integers(0, len(ids)))] = rng.choice([np.nan, np.inf, -np.inf])
    if k % 11 == 0:
        values[:] = -0.0
    return ids, values, low, count


def test_the_rows_sums_are_sum_per_ids_bit_for_bit() -> None:
    rng = np.random.default_rng(46)
    taken = 0
    for k in range(600):
        ids, values, low, count = random_case(rng, k)
        got = sum_per_row(ids, values, low, count)
        assert got is not None
        rows, sums, counts = got
        unique, want_sums, want_counts = sum_per_id(ids, values)
        if rows is None:  # every row had samples
            assert unique.tolist() == list(range(low, low + count))
        else:
            assert same_bits(rows + low, unique)
        assert same_bits(sums, want_sums) and same_bits(counts, want_counts)
        taken += rows is None
    assert 50 < taken < 550  # both shapes of the answer were compared


def test_ids_outside_the_table_are_declined() -> None:
    values = np.ones(3)
    assert sum_per_row(np.array([5, 6, 7]), values, 5, 3) is not None
    assert sum_per_row(np.array([4, 6, 7]), values, 5, 3) is None  # below
    assert sum_per_row(np.array([5, 6, 8]), values, 5, 3) is None  # above
    assert sum_per_row(np.array([5, 6, 10**12]), values, 5, 3) is None  # far above: no table
    assert sum_per_row(np.zeros(0, np.int64), np.zeros(0), 5, 3) is None
    assert sum_per_row(np.array([5]), np.ones(1), 5, 0) is None


def periods(seed: int) -> list[tuple[np.ndarray, torch.Tensor]]:
    """A study's periods: simulations appear (the table grows, a gap at times), most
    periods then lie in the known range (the shortcut), some rows absent, one diverges,
    float32 and float64 losses."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(40):
        high = 5 + 2 * min(k, 8)
        ids = rng.integers(max(0, high - 12) if k % 3 else 0, high, 64).astype(np.int64)
        if k == 33:
            ids[:4] = 200  # a gap: the statistics no longer a range from here on
        dtype = torch.float32 if k % 2 else torch.float64
        values = torch.from_numpy(rng.random(64) * (1 + k)).to(dtype)
        if k == 17:
            values[ids == ids[0]] = float("inf")
        out.append((ids, values))
    return out


def run_reductions(seed: int) -> tuple[list[Any], dict[str, np.ndarray], int]:
    losses = SimulationLosses(torch.device("cpu"), distributed=False)
    out = []
    for step, (ids, values) in enumerate(periods(seed), start=1):
        losses.record(ids[:40], values[:40])
        losses.record(ids[40:], values[40:])
        got = losses.reduce(step)
        out.append([(k, v.draws, v.mean.hex(), v.relative.hex(), v.step) for k, v in got.items()])
        assert all(type(v.draws) is int and type(v.mean) is float for v in got.values())
    return out, losses.state_dict(), losses.reductions


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_reduction_through_the_rows_is_the_plain_paths(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    used: list[bool] = []
    original = loss_per_simulation.sum_per_row

    def counted(*args: Any) -> Any:
        got = original(*args)
        used.append(got is not None)
        return got

    monkeypatch.setattr(loss_per_simulation, "sum_per_row", counted)
    fast = run_reductions(seed)
    assert sum(used) > 20 and not all(used)  # the shortcut, and the plain path at times
    # the plain path: `sum_per_id`, `_rows_of`, and the total over the finite sums masked
    monkeypatch.setattr(loss_per_simulation, "sum_per_row", lambda *args: None)
    every_total_masked = SimpleNamespace(isfinite=lambda x: False, nan=math.nan)
    monkeypatch.setattr(loss_per_simulation, "math", every_total_masked)
    plain = run_reductions(seed)
    assert fast[0] == plain[0] and fast[2] == plain[2]
    assert fast[1].keys() == plain[1].keys()
    for name, array in fast[1].items():
        assert same_bits(array, plain[1][name]), name
    assert any(not np.isfinite(float.fromhex(r[3])) for p in fast[0] for r in p)


def test_deferred_steps_of_one_dtype_and_other_sample_shapes_keep_their_order() -> None:
    def steps(shape: tuple[int, ...], n: int, seed: int) -> list[tuple[Any, Any]]:
        torch.manual_seed(seed)
        return [(torch.randn((n, *shape)) * 3, torch.randn((n, *shape))) for _ in range(2)]

    batches = [*steps((6,), 5, 0), *steps((2, 3), 4, 1), *steps((3, 2), 3, 2), *steps((6,), 2, 3)]
    deferred: Any = [deferred_sample_losses(F.mse_loss, o, t) for o, t in batches]
    want = torch.cat([step_sample_losses(F.mse_loss, o, t) for o, t in batches])
    got = losses_of(deferred)
    assert got.dtype == want.dtype and torch.equal(got, want)
    one = losses_of(deferred[:2])  # (one shape: one concatenation)
    assert torch.equal(one, want[:10])
