"""Every migration of a checkpoint record (`checkpoint_migrations`), each on its own.

The oracles are written here from the formats' descriptions, not computed by the code
under test; `test_every_migration_has_a_test` makes a new migration come with one.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from melissa_trainer.common.migrations import (
    CURRENT,
    MIGRATIONS,
    trainer_rank_of,
    upgrade,
    version_of,
)
from melissa_trainer.launcher.simulation_record import records_of

TESTED: set[tuple[str, int]] = set()


def covers(*keys: tuple[str, int]) -> Any:
    """Marks a test as the one of these migrations."""
    TESTED.update(keys)
    return lambda f: f


def _receiver_v1(rank: int, world: int, byes: dict[str, int]) -> dict[str, Any]:
    return {
        "version": 1,
        "rank": rank,
        "world_size": world,
        "simulations": {"4": {"client_count": len(byes), "byes": byes}},
        "counters": {"messages": 3},
    }


@covers(("receiver", 1), ("receiver", 2), ("receiver", 3))
def test_receiver_1_counts_become_this_receivers_steps() -> None:
    old = _receiver_v1(rank=1, world=3, byes={"0": 7, "1": 2})
    before = copy.deepcopy(old)
    new = upgrade("receiver", old)
    assert old == before  # not modified
    # steps t < 7 with t % 3 == 1: 1, 4 -> 2; t < 2: 1 -> 1
    assert new["simulations"]["4"]["byes"] == {"0": 2, "1": 1}
    assert new["version"] == 4 and new["counters"] == {"messages": 3}
    # one receiver: the counts as they were
    assert upgrade("receiver", _receiver_v1(0, 1, {"0": 5}))["simulations"]["4"]["byes"] == {"0": 5}
    # 2 -> 3: nothing archived; 3 -> 4: every simulation routed t % W (none listed
    # as "simulation_step"); the rest unchanged
    v2 = dict(_receiver_v1(0, 1, {"0": 5}), version=2)
    assert upgrade("receiver", v2) == dict(v2, version=4, routing={"simulation_step": []})


def _row(status: str, a: float, **extra: Any) -> dict[str, Any]:
    row = {"parameters": {"b": -a, "a": a}, "status": status, "restarts": 1,
           "exit_codes": [1, 0], "seconds": 2.5}  # fmt: skip
    return {**row, **extra}


@covers(("launcher", 1), ("launcher", 2))
@pytest.mark.parametrize("version", [1, 2])
def test_launcher_objects_become_columns(version: int) -> None:
    old = {
        "version": version,
        "next_id": 3,
        "redraws": 0,
        "sampler": {"kind": "uniform"},
        "simulations": {
            "2": _row("exited", 0.5, attempts=3, reason="stalled"),
            "0": _row("finished", 0.25),
        },
    }
    new = upgrade("launcher", old)
    assert new["version"] == 3 and new["next_id"] == 3 and new["sampler"] == {"kind": "uniform"}
    sims = new["simulations"]
    assert sims["ids"] == [0, 2]
    assert sims["status"] == ["finished", "exited"]
    assert sims["parameters"] == {"b": [-0.25, -0.5], "a": [0.25, 0.5]}
    assert sims["restarts"] == [1, 1]
    assert sims["attempts"] == [2, 3]  # absent: one per exit code
    assert sims["exit_codes"] == [[1, 0], [1, 0]]
    assert sims["seconds"] == [2.5, 2.5]
    assert sims["reasons"] == {"2": "stalled"}
    # read back as one object per simulation, as the rows were
    assert records_of(new)[2]["parameters"] == {"b": -0.5, "a": 0.5}
    assert records_of(old) == records_of(new)


def test_launcher_rows_with_other_parameters_are_refused() -> None:
    old = {"version": 2, "next_id": 2, "redraws": 0, "sampler": {},
           "simulations": {"0": _row("finished", 0.1),
                           "1": {**_row("finished", 0.2), "parameters": {"a": 0.2}}}}  # fmt: skip
    with pytest.raises(ValueError, match="simulation 1 .* has parameters"):
        upgrade("launcher", old)


def _breed_v1(**overrides: Any) -> dict[str, Any]:
    exploration = {"kind": "sobol", "names": ["a"], "seed": 3, "position": 9, "scramble": True}
    return {"kind": "breed", "names": ["a"], "seed": 3, "exploration_state": exploration,
            **overrides}  # fmt: skip


@covers(("breed_sampler", 1))
def test_breed_before_gapfill_explores_with_one_candidate() -> None:
    old = _breed_v1()
    assert version_of("breed_sampler", old) == 1
    new = upgrade("breed_sampler", old, candidates=1, memory=64)
    assert new["candidates"] == 1 and new["memory"] == 64
    assert new["exploration_state"] == {
        "engine": "sobol",
        "explored": 9,
        "position": 9,
        "drawn": [],
    }
    assert version_of("breed_sampler", new) == 2
    assert upgrade("breed_sampler", new, candidates=1, memory=64) == new  # current: as is
    with pytest.raises(ValueError, match="build the sampler with candidates=1"):
        upgrade("breed_sampler", old, candidates=4, memory=64)
    with pytest.raises(ValueError, match="seed=4, its sampler seed=3"):
        exploration = dict(old["exploration_state"], seed=4)
        upgrade("breed_sampler", _breed_v1(exploration_state=exploration), candidates=1, memory=1)


def test_other_sampler_states_are_not_breed_before_gapfill() -> None:
    other = dict(_breed_v1(), kind="uniform")
    assert version_of("breed_sampler", other) == 2
    assert upgrade("breed_sampler", other, candidates=1, memory=1) == other


@covers(("trainer_state", 1))
def test_trainer_state_1_leaves_samples_seen_to_the_rank_part() -> None:
    old = {"global_step": 12, "samples_seen": 12, "total_samples_seen": 24}
    assert upgrade("trainer_state", old, 1) == {"global_step": 12, "total_samples_seen": 24}
    assert upgrade("trainer_state", {"global_step": 3}, 2) == {"global_step": 3}
    assert trainer_rank_of(old) == {"samples_seen": 12, "loss_sum": 0.0, "loss_count": 0}
    assert trainer_rank_of({})["samples_seen"] == 0  # a field's default


@pytest.mark.parametrize(
    ("record", "state", "version"),
    [
        ("receiver", {"version": 7}, None),
        ("receiver", {"version": 0}, None),
        ("receiver", {}, None),
        ("launcher", {"version": 4}, None),
        ("trainer_state", {}, 3),
        ("nothing", {}, 1),
    ],
)
def test_unknown_records_and_versions_are_refused(
    record: str, state: dict[str, Any], version: int | None
) -> None:
    with pytest.raises(ValueError, match="unknown|no such"):
        upgrade(record, state, version)


def test_every_migration_has_a_test() -> None:
    assert set(MIGRATIONS) == TESTED
    for record, current in CURRENT.items():  # a chain from each version to the current
        versions = sorted(v for r, v in MIGRATIONS if r == record)
        assert versions and versions == list(range(versions[0], current)), record
