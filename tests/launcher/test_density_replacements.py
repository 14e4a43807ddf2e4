"""What a density study does when simulations fail for good (`density_replace`): the
sampler is told (`Sampler.failed`), its planned design is drawn whole and unchanged,
and each redraw past it is a point whose nearest draw was not given up, computed
without a second optimised design on the launcher's thread (before: the first redraw
past the budget optimised a whole next design there, under the launcher's lock, and
took its first point wherever it lay).

The whole-study test runs a real `Launcher` whose solver fails for good wherever
p0 > 0.8 (no restart), one job at a time (each draw follows the end of the one
before). Its oracles: a sampler of the same seed told nothing (the design's draws);
scipy's Beta distribution function for where the design placed each draw (the
sampler uses its own tabulation); the study's records for which draws failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from failing_study import BOX, N, designs_optimised, failing_launcher, rows, study, wait_done

from melissa_trainer.launcher import DensitySampler, make_sampler
from melissa_trainer.launcher.sampler_account import drawn_by
from melissa_trainer.launcher.study_record import StudyRecord

pytestmark = pytest.mark.timeout(180)


def latent(points: np.ndarray, edge: float = 0.7) -> np.ndarray:
    """Where the design placed `points` (no loss warp without a trainer: the design's
    marginal Beta(edge, edge) alone), from scipy's distribution function."""
    from scipy.stats import beta

    return np.asarray(beta.cdf(points, edge, edge))


@pytest.mark.e2e
def test_a_study_with_failures_draws_its_design_then_replacements_away_from_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    optimised = designs_optimised(monkeypatch)
    sampler = make_sampler("density", BOX, seed=3)
    launcher = failing_launcher(sampler, tmp_path)
    assert optimised == []  # (built: planned, nothing computed, a resume would replace it)
    launcher.start(tmp_path / "rendezvous", study_dir=tmp_path)
    assert optimised == [6]  # the planned design, computed when the launcher starts
    try:
        wait_done(launcher)
    finally:
        launcher.stop()
    summary = launcher.summary()
    outcomes = sorted(launcher.outcomes(), key=lambda o: o.simulation_id)
    failed = [o.simulation_id for o in outcomes if o.status == "failed"]
    assert summary["finished"] == N and summary["redraws"] == len(failed) >= 2
    # no second design was optimised for the redraws (before: one, on the launcher's
    # thread, under its lock)
    assert optimised == [6]
    assert isinstance(sampler, DensitySampler)
    assert sampler.failures == len(failed) and sampler.replaced == len(failed)
    assert sampler.position == len(outcomes) == N + len(failed)
    points = rows([dict(o.parameters) for o in outcomes])
    # the first N draws are the planned design, whole: those of a sampler told nothing
    alone = DensitySampler(BOX, seed=3)
    alone.plan(N)
    design = rows([alone.draw() for _ in range(N)])
    np.testing.assert_array_equal(points[:N], design)
    u = latent(points)
    assert all(sorted((u[:N, j] * N).astype(int)) == list(range(N)) for j in range(6))
    assert f"({len(failed)} in place of simulations given up" in drawn_by(sampler)
    # each replacement's nearest earlier draw (where the design placed them) did not fail
    for j in range(N, len(outcomes)):
        nearest = int(np.argmin(np.sum((u[:j] - u[j]) ** 2, axis=1)))
        assert outcomes[nearest].status == "finished", (j, nearest)


def told(sampler: DensitySampler, draws: list[dict[str, float]], fails: Any) -> None:
    """Tell `sampler` of each of `draws` that `fails`."""
    for i, p in enumerate(draws):
        if fails(p):
            sampler.failed(i, p)


def test_replacements_resume_bit_for_bit_and_a_sampler_told_nothing_is_unchanged() -> None:
    def fresh() -> DensitySampler:
        sampler = DensitySampler(BOX, seed=5, share=0.0)
        sampler.plan(10)
        return sampler

    whole: list[Any] = []
    study(fresh(), 0, 16, whole)
    for cut in (10, 12):
        first, made = fresh(), []
        study(first, 0, cut, made)
        state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint holds it
        assert state["failed"] and state["replaced"] == max(0, cut - 10)
        resumed = fresh()
        resumed.load_state_dict(state)
        study(resumed, cut, 16, made)
        assert made == whole
    # told nothing: no replacement, the next design past the budget as before, and a
    # state without the replacements' entries
    plain = fresh()
    draws = [plain.draw() for _ in range(12)]
    assert plain.replaced == 0 and "failed" not in plain.state_dict()
    assert draws[:10] == whole[:10]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"replaced": 5}, "5 replacements for"),
        ({"replaced": -1}, "invalid replaced"),
        ({"failed": [[0.5] * 5]}, "malformed failed points"),
        ({"failed": [[2.0] * 6]}, "malformed failed points"),
        ({"failed": "x"}, "malformed failed points"),
    ],
)
def test_a_malformed_replacement_state_is_refused(change: dict[str, Any], match: str) -> None:
    sampler = DensitySampler(BOX, seed=5)
    sampler.plan(4)
    draws = [sampler.draw() for _ in range(4)]
    sampler.failed(0, draws[0])
    sampler.draw()
    state = {**sampler.state_dict(), **change}
    target = DensitySampler(BOX, seed=5)
    target.plan(4)
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(state)


class Listening(DensitySampler):
    """Records what it is told."""

    def __init__(self) -> None:
        super().__init__(BOX, seed=0)
        self.told: list[int] = []

    def failed(self, simulation_id: int, parameters: Any) -> None:
        self.told.append(simulation_id)
        super().failed(simulation_id, parameters)


@pytest.mark.parametrize(("on_failure", "outcome"), [("redraw", "redraw"), ("abandon", "abandon")])
def test_the_sampler_is_told_of_a_simulation_given_up_not_of_a_restart(
    on_failure: str, outcome: str
) -> None:
    sampler = Listening()
    record = StudyRecord(sampler, 4, max_restarts=1, on_failure=on_failure, max_redraws=4,
                         first_simulation_id=0)  # fmt: skip
    sid = record.take(0.0)
    assert sid is not None
    assert record.process_ended(sid, 1.0, 1) == "restart" and sampler.told == []
    assert record.take(2.0) == sid
    assert record.process_ended(sid, 3.0, 1) == outcome and sampler.told == [sid]
