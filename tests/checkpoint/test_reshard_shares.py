"""Each owner's share of a checkpoint written by k ranks and resumed on m != k ranks
(`checkpoint_reshard`), as pure functions: sums over ranks kept, nothing lost or counted
twice; the RNG seed of a resharded rank; the manifest's verification, each file by one
rank."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from melissa_trainer.checkpoint.manifest import owned_by
from melissa_trainer.checkpoint.reshard import RESHARD_SEED_TAG, reshard_seed, seed_everything
from melissa_trainer.core.figures import LogFigures
from melissa_trainer.core.loss_per_simulation import SimulationLosses
from melissa_trainer.core.state import share_samples_seen

pytestmark = pytest.mark.timeout(60)

CHANGES = [(1, 2), (2, 1), (2, 3), (3, 2), (3, 1), (1, 3), (4, 3)]


# -- each owner's share: pure functions ---------------------------------------------------


@pytest.mark.parametrize(("old", "new"), CHANGES)
def test_samples_seen_are_dealt_out_their_sum_kept(old: int, new: int) -> None:
    counts = [83 + 5 * r for r in range(old)]
    shares = [share_samples_seen(counts, r, new) for r in range(new)]
    assert sum(shares) == sum(counts)
    assert max(shares) - min(shares) <= 1
    assert shares == sorted(shares, reverse=True)  # the lower ranks take the remainder
    with pytest.raises(ValueError, match="rank 3 is not one of 3"):
        share_samples_seen(counts, 3, 3)


def test_the_loss_since_the_last_log_is_held_by_rank_0() -> None:
    states = [{"loss_sum": 1.5, "loss_count": 3}, {"loss_sum": 0.25, "loss_count": 1}]
    assert LogFigures.reshard_state(states, 0) == {"loss_sum": 1.75, "loss_count": 4}
    assert LogFigures.reshard_state(states, 1) == {"loss_sum": 0.0, "loss_count": 0}
    figures = LogFigures(torch.device("cpu"))
    figures.load_state_dict(LogFigures.reshard_state(states, 0))
    assert (float(figures.loss_sum), figures.loss_count) == (1.75, 4)


def losses_state(rank: int, unreduced: int) -> dict[str, np.ndarray]:
    """A `SimulationLosses.state_dict()` of old rank `rank`: shared statistics, and
    `unreduced` samples of its own (ids and losses unique to it)."""
    ids = np.arange(unreduced, dtype=np.int64) + 1000 * rank
    return {
        "ids": np.array([3, 5], np.int64),
        "draws": np.array([4, 2], np.int64),
        "loss_sum": np.array([1.0, 0.5]),
        "relative_sum": np.array([4.2, 1.9]),
        "step": np.array([6, 6], np.int64),
        "reference_sums": np.array([1.5]),
        "reference_counts": np.array([6], np.int64),
        "unreduced_ids": ids,
        "unreduced_losses": ids.astype(np.float64) / 7,
    }


@pytest.mark.parametrize(("old", "new"), CHANGES)
def test_simulation_losses_keep_the_statistics_and_every_unreduced_sample_once(
    old: int, new: int
) -> None:
    states = [losses_state(r, 3 + r) for r in range(old)]
    shares = [SimulationLosses.reshard_state(states, r, new) for r in range(new)]
    for shared in shares:
        for name in ("ids", "draws", "loss_sum", "relative_sum", "step", "reference_sums"):
            assert np.array_equal(shared[name], states[0][name])

    def pairs(shares: list[dict[str, np.ndarray]]) -> list[tuple[int, float]]:
        ids = np.concatenate([s["unreduced_ids"] for s in shares]).tolist()
        values = np.concatenate([s["unreduced_losses"] for s in shares]).tolist()
        return sorted(zip(ids, values, strict=True))

    before, after = pairs(states), pairs(shares)
    assert after == before  # none lost, none twice, each with its own loss
    # and a trainer loads its share
    losses = SimulationLosses(torch.device("cpu"), distributed=False)
    losses.load_state_dict(shares[0])
    assert losses.unreduced == len(shares[0]["unreduced_ids"])
    assert losses[3].draws == 4


def test_simulation_losses_that_differ_between_ranks_are_refused() -> None:
    states = [losses_state(0, 2), {**losses_state(1, 2), "draws": np.array([4, 3])}]
    with pytest.raises(ValueError, match="old ranks 0 and 1 differ in 'draws'"):
        SimulationLosses.reshard_state(states, 0, 1)


def test_the_seed_of_a_resharded_rank_is_the_documented_hash() -> None:
    state = torch.get_rng_state().numpy().tobytes()
    seeds = {(m, r): reshard_seed(state, m, r) for m in (1, 2, 3) for r in range(m)}
    assert len(set(seeds.values())) == len(seeds)  # every rank of every world size its own
    assert reshard_seed(state, 2, 1) == seeds[(2, 1)]  # deterministic
    expected = hashlib.sha256(RESHARD_SEED_TAG + state + b"2:1").digest()
    assert seeds[(2, 1)] == int.from_bytes(expected[:8], "big") & (2**63 - 1)
    other = bytearray(state)
    other[100] ^= 1
    assert reshard_seed(bytes(other), 2, 1) != seeds[(2, 1)]  # another checkpoint
    seed_everything(seeds[(2, 1)])
    drawn = (torch.rand(3), np.random.rand(3))
    torch.manual_seed(seeds[(2, 1)])
    np.random.seed(seeds[(2, 1)] % 2**32)
    assert torch.equal(drawn[0], torch.rand(3)) and np.array_equal(drawn[1], np.random.rand(3))


@pytest.mark.parametrize(("old", "new"), [*CHANGES, (2, 2), (1, 1)])
def test_every_file_is_verified_by_exactly_one_rank(old: int, new: int) -> None:
    entries = {f"rank_{r}/{name}": {"rank": r} for r in range(old) for name in ("a", "b")}
    entries |= {"model.safetensors": {"rank": 0}, f"random_states_{old - 1}.pkl": {"rank": old - 1}}
    shares = [owned_by(entries, r, new) for r in range(new)]
    verified = [rel for share in shares for rel in share]
    assert sorted(verified) == sorted(entries)  # each once
    if old == new:  # each rank its own files, as before
        assert all(e["rank"] == r for r, share in enumerate(shares) for e in share.values())
