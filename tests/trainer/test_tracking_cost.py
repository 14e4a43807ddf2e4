"""The shortcuts that make per-simulation losses cheap on every step (issue 46, the
acquisition's cost) give the same values as the plain computations they replace:

* `step_sample_losses`: the default loss's kernel called directly, no `no_grad` block,
  against ``loss_fn(outputs, targets, reduction="none")`` averaged per sample;
* `sum_per_id`: a period's per-simulation sums counted in a table over the ids'
  range, against a sum written here in the samples' order (and the sorted path).

Bit for bit: the sampler is steered by these numbers, and a run must not depend on
which path computed them.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from melissa_trainer.core import (
    loss_per_simulation,
    loss_per_simulation_state,
    loss_sums,
    period_losses,
    sample_losses,
)
from melissa_trainer.core.loss_per_simulation import SimulationLosses
from melissa_trainer.core.loss_sums import sum_per_id
from melissa_trainer.core.period_losses import PeriodLosses
from melissa_trainer.core.sample_losses import (
    DeferredSampleLosses,
    deferred_sample_losses,
    losses_of,
    per_sample_losses,
    step_sample_losses,
)


def plain(loss_fn: Any, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The per-sample losses as the module docstring of `sample_losses` defines them."""
    losses = loss_fn(outputs.detach(), targets, reduction="none")
    return losses.reshape(losses.shape[0], -1).mean(dim=1) if losses.dim() > 1 else losses


@pytest.mark.parametrize("shape", [(32, 256), (7, 3, 5), (9,), (4, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_default_losses_shortcut_equals_the_loss_per_sample(
    shape: Any, dtype: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def generic(*args: Any) -> None:
        raise AssertionError("the default loss took the generic path")

    monkeypatch.setattr(sample_losses, "per_sample_losses", generic)  # the shortcut's taken
    torch.manual_seed(0)
    weights = torch.randn(shape[-1], shape[-1], dtype=dtype, requires_grad=True)
    outputs = torch.randn(shape, dtype=dtype) @ weights  # carries a graph, as a step's
    targets = torch.randn(shape, dtype=dtype)
    got = step_sample_losses(F.mse_loss, outputs, targets)
    assert torch.equal(got, plain(F.mse_loss, outputs, targets))
    assert got.dtype == dtype and got.shape == (shape[0],)
    assert got.grad_fn is None and not got.requires_grad  # no backward node


def test_the_shortcut_follows_mixed_dtypes_and_autocast_as_the_loss_does() -> None:
    torch.manual_seed(2)
    outputs = torch.randn(8, 5, dtype=torch.bfloat16, requires_grad=True) * 3
    targets = torch.randn(8, 5)  # float32 targets of bfloat16 outputs: promoted
    got = step_sample_losses(F.mse_loss, outputs, targets)
    assert got.dtype == torch.float32 and torch.equal(got, plain(F.mse_loss, outputs, targets))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # mixed_precision="bf16"
        got = step_sample_losses(F.mse_loss, outputs, targets)
        assert torch.equal(got, plain(F.mse_loss, outputs, targets))


def test_other_losses_and_shapes_take_the_generic_path_unchanged() -> None:
    torch.manual_seed(1)
    outputs = torch.randn(6, 4, requires_grad=True) * 2
    targets = torch.randn(6, 4)
    for loss_fn in (F.l1_loss, F.smooth_l1_loss):
        got = step_sample_losses(loss_fn, outputs, targets)
        assert torch.equal(got, plain(loss_fn, outputs, targets)) and got.grad_fn is None
    # targets that broadcast (mse_loss warns of it): the generic path, which warns too
    wide = torch.randn(6, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = step_sample_losses(F.mse_loss, outputs, wide)
    assert any("broadcasting" in str(w.message) for w in caught)
    assert torch.equal(got, plain(F.mse_loss, outputs, wide.expand(6, 4)))
    # targets that require a gradient, and a loss with parameters: nothing recorded
    scale = torch.tensor(2.0, requires_grad=True)

    def scaled(a: torch.Tensor, b: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        return F.mse_loss(a * scale, b, reduction=reduction)

    for loss_fn, target in ((F.mse_loss, targets.clone().requires_grad_()), (scaled, targets)):
        got = step_sample_losses(loss_fn, outputs, target)
        assert got.grad_fn is None
        assert torch.equal(got, per_sample_losses(loss_fn, outputs.detach(), target).detach())


def oracle(ids: np.ndarray, values: np.ndarray) -> dict[int, tuple[float, int]]:
    """Per id: its values summed in their order (float64), and how many."""
    out: dict[int, tuple[float, int]] = {}
    for sid, value in zip(ids.tolist(), values.tolist(), strict=True):
        total, count = out.get(sid, (0.0, 0))
        out[sid] = (total + value, count + 1)
    return out


@pytest.mark.parametrize("spread", [1, 40, 10**6])  # the table, then the sort (wide)
def test_a_periods_sums_per_simulation_are_its_losses_in_their_order(spread: int) -> None:
    rng = np.random.default_rng(spread)
    ids = rng.integers(0, spread, 640) + 5_000  # offset: the table starts at the least
    values = rng.standard_normal(640) * 10.0 ** rng.integers(-8, 8, 640)  # rounding shows
    values[3] = np.nan
    unique, sums, counts = sum_per_id(ids, values)
    expected = oracle(ids, values)
    assert unique.tolist() == sorted(expected) and counts.dtype == np.int64
    for sid, total, count in zip(unique.tolist(), sums.tolist(), counts.tolist(), strict=True):
        want = expected[sid]
        assert count == want[1]
        assert total == want[0] or (np.isnan(total) and np.isnan(want[0]))


def test_the_table_and_the_sort_fold_ranks_sums_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # every rank's (id, sum, count), concatenated in rank order: the same id on two ranks
    rng = np.random.default_rng(4)
    ids = np.concatenate([np.arange(10, 30), np.arange(20, 45)])
    sums, counts = rng.standard_normal(len(ids)), rng.integers(1, 9, len(ids))
    table = sum_per_id(ids, sums, counts)
    monkeypatch.setattr(loss_sums, "TABLE_SPAN", 0)  # always sorted
    sort = sum_per_id(ids, sums, counts)
    for a, b in zip(table, sort, strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    expected = oracle(ids, sums)
    assert table[1].tolist() == [expected[s][0] for s in table[0].tolist()]
    assert table[2].tolist() == [int(counts[ids == s].sum()) for s in table[0].tolist()]


def test_a_reduction_is_the_same_through_the_table_or_the_sort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run() -> list[Any]:
        rng = np.random.default_rng(7)
        losses = SimulationLosses(torch.device("cpu"), distributed=False)
        out = []
        for step in range(1, 61):
            batch = torch.from_numpy(rng.random(32).astype(np.float32))
            losses.record(rng.integers(step, step + 30, 32), batch)
            if step % 20 == 0:
                out.append(sorted(losses.reduce(step).items()))
        return out

    table = run()
    monkeypatch.setattr(loss_sums, "TABLE_SPAN", 0)
    assert run() == table and len(table[-1]) > 20


# -- deferred per-sample losses (issue 46, sixth round) ---------------------------------------


def micro_batches(shape: tuple[int, ...], dtype: Any, rows: list[int]) -> list[Any]:
    """Steps' (outputs with a graph, targets) of `rows` samples each, sample `shape`."""
    torch.manual_seed(len(rows))
    out = []
    for n in rows:
        inputs = torch.randn((n, *shape), dtype=dtype) * 10.0
        if shape:
            outputs = inputs @ torch.randn(shape[-1], shape[-1], dtype=dtype, requires_grad=True)
        else:
            outputs = inputs * torch.randn((), dtype=dtype, requires_grad=True)
        out.append((outputs, torch.randn((n, *shape), dtype=dtype)))
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(256,), (3, 5), (), (1,)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_deferred_losses_of_many_steps_are_each_steps_bit_for_bit(
    threads: int, shape: Any, dtype: Any
) -> None:
    # one mean over every row of 20 steps' elementwise losses (a last one smaller):
    # each row's mean the same bits as its step's own `step_sample_losses`
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        steps = micro_batches(shape, dtype, [32] * 19 + [7])
        deferred: Any = [deferred_sample_losses(F.mse_loss, o, t) for o, t in steps]
        # (one value a sample: nothing to average, the losses come computed)
        kind = DeferredSampleLosses if shape else torch.Tensor
        assert all(type(d) is kind for d in deferred)
        got = losses_of(deferred) if shape else torch.cat(deferred)
        want = torch.cat([step_sample_losses(F.mse_loss, o, t) for o, t in steps])
    finally:
        torch.set_num_threads(before)
    assert got.dtype == want.dtype and got.shape == want.shape == (32 * 19 + 7,)
    assert torch.equal(got, want) and got.grad_fn is None


def test_deferred_runs_of_other_shapes_and_dtypes_stay_in_order() -> None:
    # micro-batches that cannot be concatenated (another sample shape, another dtype:
    # torch.cat would promote) are computed in runs, in the order recorded
    steps = [
        *micro_batches((4,), torch.float32, [3, 5]),
        *micro_batches((6,), torch.float32, [2]),
        *micro_batches((6,), torch.float64, [4, 1]),
        *micro_batches((4,), torch.float32, [3]),
    ]
    deferred: Any = [deferred_sample_losses(F.mse_loss, o, t) for o, t in steps]
    want = torch.cat([step_sample_losses(F.mse_loss, o, t).double() for o, t in steps])
    assert torch.equal(losses_of(deferred).double(), want)
    assert torch.equal(losses_of(deferred[:1]), step_sample_losses(F.mse_loss, *steps[0]))


def test_only_what_is_averaged_alike_is_deferred() -> None:
    outputs = torch.randn(6, 4, requires_grad=True) * 2
    targets = torch.randn(6, 4)
    for loss_fn, o, t in (
        (F.l1_loss, outputs, targets),  # another loss
        (F.mse_loss, outputs.t(), targets.t()),  # a strided result
        (F.mse_loss, outputs, torch.randn(6, 1)),  # broadcast (mse warns)
        (F.mse_loss, outputs[:, 0], targets[:, 0]),  # one value a sample: no mean
        (F.mse_loss, outputs[0, 0], targets[0, 0]),  # 0-d
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = deferred_sample_losses(loss_fn, o, t)
            assert isinstance(got, torch.Tensor) and got.grad_fn is None
            assert torch.equal(got, step_sample_losses(loss_fn, o, t))


def test_a_period_keeps_computed_and_deferred_losses_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # deferred batches are computed when a computed one follows them, when the period is
    # read, and once they hold more than DEFERRED_BYTES (here: about two batches)
    monkeypatch.setattr(period_losses, "DEFERRED_BYTES", 2 * 3 * 4 * 4)
    steps = micro_batches((4,), torch.float32, [3] * 9)
    period = PeriodLosses(torch.device("cpu"))
    want = []
    for i, (o, t) in enumerate(steps):
        losses = step_sample_losses(F.mse_loss, o, t)
        want.append(losses)
        if i in (4, 5):
            period.record(np.full(3, i, np.int64), losses)
        else:
            period.defer(np.full(3, i, np.int64), deferred_sample_losses(F.mse_loss, o, t))  # type: ignore[arg-type]
        assert len(period._deferred) <= 2  # bounded
    assert len(period) == 27
    ids, kept = period.arrays()
    assert ids.tolist() == np.repeat(np.arange(9), 3).tolist()
    assert kept.tolist() == torch.cat(want).double().tolist()
    taken_ids, taken = period.take()
    assert taken_ids.tolist() == ids.tolist() and taken.tolist() == kept.tolist()
    assert len(period) == 0 and period.take()[0].size == 0


def test_a_tracker_alone_takes_the_losses_deferred_and_reduces_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the same run, the tracker alone (deferred) and with a user hook listening too (the
    # tensors, computed each step): every statistic and the checkpoint's state the same bits
    from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

    recorded: list[type] = []

    def spying(original: Any) -> Any:
        def spy(self: Any, ids: Any, losses: Any) -> None:
            recorded.append(type(losses))
            original(self, ids, losses)

        return spy

    monkeypatch.setattr(PeriodLosses, "record", spying(PeriodLosses.record))
    monkeypatch.setattr(PeriodLosses, "defer", spying(PeriodLosses.defer))

    class Listener(Hook):
        def on_sample_losses(self, trainer: Any, state: Any, control: Any, losses: Any,
                             simulation_ids: Any) -> None:  # fmt: skip
            assert isinstance(losses, torch.Tensor)

    rng = np.random.default_rng(5)
    data = [{"x": rng.standard_normal(5).astype(np.float32),
             "y": rng.standard_normal(37).astype(np.float32),
             "simulation_id": np.array(i % 7, np.int64)} for i in range(90)]  # fmt: skip

    class AtLoopEnd(Hook):
        """The statistics' state as the run's last checkpoint would hold it: before the
        end of training reduces the steps since the last reduction (TRAIN_END)."""

        def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
            self.state = trainer.simulation_losses.state_dict()

    def run(where: Path, hooks: list[Any]) -> tuple[Any, Any]:
        last = AtLoopEnd()
        hooks = [*hooks, last]
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 37))  # fmt: skip
        args = TrainingArguments(output_dir=str(where), batch_size=8, buffer="fifo",
                                 buffer_size=32, report_to="none", disable_progress_bar=True,
                                 simulation_loss_steps=5, save_at_end=False)  # fmt: skip
        trainer = OnlineTrainer(model, args, torch.optim.Adam(model.parameters(), lr=0.01),
                                train_source=iter(data), hooks=hooks,
                                process_sample=lambda s: (torch.from_numpy(s["x"]),
                                                          torch.from_numpy(s["y"])))  # fmt: skip
        trainer.train()
        losses = trainer.simulation_losses
        stats = [(k, v.draws, v.mean.hex(), v.relative.hex(), v.step) for k, v in losses.items()]
        assert losses.unreduced == 0  # reduced at the end of training
        return stats, last.state

    deferred_stats, deferred_state = run(tmp_path / "a", [])
    assert set(recorded) == {DeferredSampleLosses}
    recorded.clear()
    computed_stats, computed_state = run(tmp_path / "b", [Listener()])
    assert set(recorded) == {torch.Tensor}
    assert deferred_stats == computed_stats and len(deferred_stats) == 7
    assert deferred_state.keys() == computed_state.keys()
    assert deferred_state["unreduced_ids"].size > 0  # the loop ends between reductions
    for name, array in deferred_state.items():
        assert np.array_equal(array, computed_state[name]), name


def rows_oracle(periods: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[int, tuple]]:
    """Each reduction's statistics as the code before issue 46's seventh round computed
    them: one Python row per simulation, updated in a loop (its reference periods the
    library's, which this test does not change)."""
    from collections import deque

    stats: dict[int, list[Any]] = {}
    recent: deque[tuple[float, int]] = deque(maxlen=loss_per_simulation.REFERENCE_PERIODS)
    out = []
    for step, (ids, values) in enumerate(periods, start=1):
        uids, sums, counts = sum_per_id(ids, values)
        finite = np.isfinite(sums)
        recent.append((float(sums[finite].sum()), int(counts[finite].sum())))
        kept = sum(n for _, n in recent)
        ref = sum(t for t, _ in recent) / kept
        relative = counts + (sums - counts * ref) / abs(ref)
        updated = {}
        for sid, s, r, c in zip(uids.tolist(), sums.tolist(), relative.tolist(),
                                counts.tolist(), strict=True):  # fmt: skip
            entry = stats.setdefault(sid, [0, 0.0, 0.0, step])
            entry[0] += c
            entry[1] += s
            entry[2] += r
            entry[3] = step
            updated[sid] = (entry[0], (entry[1] / entry[0]).hex(), (entry[2] / entry[0]).hex(),
                            step)  # fmt: skip
        out.append(updated)
    return out


def test_the_statistics_columns_reduce_as_one_row_per_simulation_did() -> None:
    # new simulations appear below, between and above the known ones; one diverges
    rng = np.random.default_rng(11)
    periods = []
    for k in range(30):
        ids = rng.integers(max(0, 3 * k - 20), 3 * k + 5, 64).astype(np.int64)
        values = rng.random(64) * (1 + k)
        if k == 7:
            values[ids == ids[0]] = np.inf
        periods.append((ids, values))
    periods.insert(12, (np.array([0, 1000], np.int64), np.array([2.0, 3.0])))
    expected = rows_oracle(periods)
    losses = SimulationLosses(torch.device("cpu"), distributed=False)
    for step, ((ids, values), want) in enumerate(zip(periods, expected, strict=True), 1):
        losses.record(ids, torch.from_numpy(values))
        got = losses.reduce(step)
        assert {k: (v.draws, v.mean.hex(), v.relative.hex(), v.step)
                for k, v in got.items()} == want  # fmt: skip
        assert all(type(v.draws) is int and type(v.mean) is float for v in got.values())
    last: dict[int, tuple] = {}
    for want in expected:
        last.update(want)
    assert list(losses) == sorted(last) and len(losses) == len(last)
    for sid, row in last.items():
        v = losses[sid]
        assert (v.draws, v.mean.hex(), v.relative.hex(), v.step) == row
    with pytest.raises(KeyError, match="999"):
        losses[999]
    # a state whose ids are not in order (written by hand): read as the same statistics
    state = losses.state_dict()
    order = rng.permutation(len(state["ids"]))
    shuffled = {k: (v[order] if k in loss_per_simulation_state._SHARED[:5] else v)
                for k, v in state.items()}  # fmt: skip
    restored = SimulationLosses(torch.device("cpu"), distributed=False)
    restored.load_state_dict(shuffled)
    assert list(restored) == list(losses)
    assert all(restored[k] == losses[k] for k in losses)
    for name, array in restored.state_dict().items():
        assert np.array_equal(array, state[name]), name


def test_a_reductions_statistics_are_the_dataclass_s_own_instances() -> None:
    import dataclasses

    made = loss_per_simulation._made(4, 7, 0.25, 1.5, 40)
    plain_one = loss_per_simulation.SimulationLoss(4, 7, 0.25, 1.5, 40)
    assert type(made) is loss_per_simulation.SimulationLoss
    assert made == plain_one and hash(made) == hash(plain_one) and repr(made) == repr(plain_one)
    assert dataclasses.asdict(made) == dataclasses.asdict(plain_one)
    assert dataclasses.replace(made, draws=8) == dataclasses.replace(plain_one, draws=8)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'draws'"):
        made.draws = 3  # type: ignore[misc]
