"""An adaptive sampler whose losses came in time and steered none of its draws says so,
as a WARNING at the end of the study (`launcher.account.unsteered_line`), and the
density sampler counts the draws the loss bent (`DensitySampler.bent`, in its state).

Before: the heat example's ``--sampler density`` at its defaults (64 simulations)
ended with "56 with the high-loss warp" and an INFO account, while the loss bent none
of those draws (no temperature's rank correlation with it reached `evidence`): a
fixed design's draws reported as adaptive ones. Breed with ``exploration=0.7`` at 16
simulations bred none of the 7 draws that held `min_observations` losses, and the
account was INFO too.

Oracles, independent of the samplers' code: equal losses give every parameter a rank
correlation of 0 (no evidence, nothing bent), losses rising with ``x`` alone (the
launch-order trend removed: ``x`` shuffled against the ids) give ``x`` a rank
correlation of 1 (evidence sqrt(15) > 3, bent at every draw); Breed's draw `i`
explores when ``default_rng([seed, i]).random() < exploration`` (its documented
contract), counted here.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import BreedSampler, DensitySampler
from melissa_trainer.launcher.account import log_account
from melissa_trainer.launcher.sampler_account import drawn_by
from melissa_trainer.launcher.steering import steered_draws, unsteered_line

BOUNDS = {"x": (0.0, 1.0), "y": (0.0, 1.0)}
#: 16 observed simulations (ids 100...): y rises with the ids, x shuffled against them
Y = [(i + 0.5) / 16 for i in range(16)]
X = [Y[j] for j in (5, 12, 0, 15, 3, 9, 14, 1, 10, 7, 2, 13, 6, 11, 4, 8)]


def observed(sampler: Any, losses: list[float]) -> Any:
    for i, loss in enumerate(losses):
        sampler.observe(100 + i, {"x": X[i], "y": Y[i]}, loss)
    return sampler


def density(losses: list[float], draws: int = 4, **options: Any) -> DensitySampler:
    sampler = observed(DensitySampler(BOUNDS, seed=0, **options), losses)
    sampler.plan(draws)
    for _ in range(draws):
        sampler.draw()
    return sampler


def account(sampler: Any, caplog: pytest.LogCaptureFixture) -> tuple[list[str], int]:
    """`log_account`'s lines for a study of no simulation drawn by `sampler`, and the
    level it logged them at."""
    with caplog.at_level(logging.INFO, logger="melissa_trainer.launcher"):
        lines, _ = log_account([], {}, sampler)
    (record,) = [r for r in caplog.records if r.getMessage().startswith("study account")]
    return lines, record.levelno


def test_a_density_study_whose_loss_bent_no_draw_says_so_as_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler = density([1.0] * 16)
    assert (sampler.warped, sampler.bent) == (4, 0)
    assert "4 with the high-loss warp (0 of them bent by the loss, 4 the design's alone)" in (
        drawn_by(sampler)
    )
    lines, level = account(sampler, caplog)
    assert level == logging.WARNING
    assert lines[-1] == (
        "  the adaptive sampler steered none of its draws: the loss bent none of the 4 "
        "drawn with the high-loss warp on, no parameter having the evidence=3 it needs "
        "(above): the draws are the design's"
    )


def test_a_density_study_whose_loss_bent_its_draws_is_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler = density([1.0 + 3 * x for x in X])
    assert (sampler.warped, sampler.bent) == (4, 4)
    assert unsteered_line(sampler) is None
    lines, level = account(sampler, caplog)
    assert level == logging.INFO
    assert "(4 of them bent by the loss, 0 the design's alone); the loss bends x now" in lines[-1]


def test_the_bent_count_is_in_the_state_and_resumes() -> None:
    losses = [1.0 + 3 * x for x in X]
    whole = density(losses, draws=6)
    half = observed(DensitySampler(BOUNDS, seed=0), losses)
    half.plan(6)
    for _ in range(3):
        half.draw()
    again = DensitySampler(BOUNDS, seed=0)
    again.plan(6)
    again.load_state_dict(half.state_dict())
    assert (again.warped, again.bent) == (3, 3)
    for _ in range(3):
        again.draw()
    assert again.state_dict() == whole.state_dict()


def test_a_state_saved_before_the_count_loads_it_unknown_and_says_nothing_of_it() -> None:
    state = density([1.0] * 16).state_dict()
    del state["bent"]
    sampler = DensitySampler(BOUNDS, seed=0)
    sampler.plan(4)
    sampler.load_state_dict(state)
    assert sampler.bent is None
    assert "bent by the loss" not in drawn_by(sampler)
    assert unsteered_line(sampler) is None  # (unknown: not said to have steered none)


@pytest.mark.parametrize("bent", [5, -1, True, "2"])
def test_a_malformed_bent_count_is_refused(bent: Any) -> None:
    state = density([1.0] * 16).state_dict()  # 4 warped
    sampler = DensitySampler(BOUNDS, seed=0)
    sampler.plan(4)
    with pytest.raises(ValueError, match="invalid bent count"):
        sampler.load_state_dict({**state, "bent": bent})


def breed(exploration: float, draws: int, seed: int = 0) -> BreedSampler:
    """A Breed sampler of `draws` draws, each after observing the draws before it (from
    the first, as 16 simulations observed before the study)."""
    sampler = observed(BreedSampler(BOUNDS, seed=seed, exploration=exploration), [1.0] * 16)
    sampler.plan(draws)
    for i in range(draws):
        sampler.observe(i, sampler.draw(), 1.0 + i)
    return sampler


def bred_by_contract(exploration: float, draws: int, seed: int = 0) -> int:
    return sum(np.random.default_rng([seed, i]).random() >= exploration for i in range(draws))


def test_a_breed_study_that_bred_none_of_its_adaptive_draws_says_so_as_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler = breed(0.9, 6)
    assert bred_by_contract(0.9, 6) == 0  # (the oracle: no draw breeds with this seed)
    assert sampler.adaptive_draws == 6 and sampler.explored == 6
    lines, level = account(sampler, caplog)
    assert level == logging.WARNING
    assert lines[-1].startswith(
        "  the adaptive sampler steered none of its draws: of the 6 drawn holding at least "
        "min_observations=8 losses, none was bred (each with probability 1 - exploration "
        "= 0.1): "
    )


def test_a_breed_study_that_bred_is_no_warning_nor_is_the_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler = breed(0.3, 6)
    bred = bred_by_contract(0.3, 6)
    assert bred > 0 and sampler.position - sampler.explored == bred
    assert unsteered_line(sampler) is None
    # the default never breeds: the study's start said so (`static_sampler`), not its end
    assert unsteered_line(breed(1.0, 6)) is None
    _, level = account(sampler, caplog)
    assert level == logging.INFO


def test_steered_draws_counts_in_each_sampler_s_terms() -> None:
    losses = [1.0 + 3 * x for x in X]
    assert steered_draws(density(losses)) == 4  # every draw bent (x's evidence)
    assert steered_draws(density([1.0] * 16)) == 0
    assert steered_draws(breed(0.3, 6)) == bred_by_contract(0.3, 6)
    assert steered_draws(breed(1.0, 6)) == 0


def test_after_the_feedback_s_lines_it_is_not_said_twice(caplog: pytest.LogCaptureFixture) -> None:
    """A study told that its losses came late (`study.feedback`'s lines, the caller's
    `warnings`) is not also told that they steered none: one reason, one line."""
    sampler = density([1.0] * 16)
    with caplog.at_level(logging.INFO, logger="melissa_trainer.launcher"):
        lines, warned = log_account([], {}, sampler, ["  the losses came late"])
    assert warned and lines[-1] == "  the losses came late"
    assert not any("steered none" in line for line in lines)
