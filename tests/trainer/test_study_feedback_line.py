"""When `melissa_trainer.study.feedback` says that an adaptive sampler steered no draw,
and when it keeps quiet (the end-to-end case is `test_study_feedback`): it judges the
last draw's count of losses against the sampler's `min_observations`, and leaves alone
what the study's start already said (`launcher.sampler_account.static_sampler`), a fixed
design, and a process that drew nothing."""

from __future__ import annotations

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.study.feedback import FeedbackCheck, unfed_line

BOUNDS = {"a": (0.0, 1.0)}


def drawn(sampler: AdaptiveSampler, draws: int, observed_before: int = 0) -> AdaptiveSampler:
    """`sampler` after `draws` draws, the first `observed_before` of them observed
    (each with a loss) before the rest are drawn."""
    made = [sampler.draw() for _ in range(observed_before)]
    for sid, parameters in enumerate(made):
        sampler.observe(sid, parameters, float(sid))
    for _ in range(draws - observed_before):
        sampler.draw()
    return sampler


def test_a_sampler_that_held_too_few_losses_at_its_last_draw_is_told() -> None:
    sampler = drawn(BreedSampler(BOUNDS, exploration=0.5), 12, observed_before=7)
    line = unfed_line(sampler, 20)
    assert line is not None
    assert "of 12 draws, 0 adaptive and 12 exploratory" in line
    assert "held the training losses of 7 simulations, and it adapts from 8 on" in line
    check = FeedbackCheck()
    check.started(BreedSampler(BOUNDS, exploration=0.5), 12)
    check.loss_steps = 20
    assert check.lines(sampler) == [line]


def test_a_sampler_that_held_enough_losses_at_its_last_draw_is_not() -> None:
    sampler = drawn(BreedSampler(BOUNDS, exploration=0.5), 12, observed_before=8)
    assert unfed_line(sampler, 20) is None


def test_what_the_start_said_a_fixed_design_and_no_draw_are_not_judged() -> None:
    # Breed's default (exploration=1.0) never breeds: the launcher said so at its start
    static = drawn(BreedSampler(BOUNDS), 12)
    assert unfed_line(static, 20) is not None  # (the line alone would say it again)
    check = FeedbackCheck()
    check.started(BreedSampler(BOUNDS), 12)
    assert check.lines(static) == []
    assert unfed_line(make_sampler("lhs", BOUNDS, seed=0), 20) is None
    assert unfed_line(BreedSampler(BOUNDS, exploration=0.5), 20) is None  # (no draw)


class Worst(AdaptiveSampler):
    """A user's sampler, without `min_observations`: it adapts from one loss on."""

    kind = "worst"

    def _propose(self, index: int) -> dict[str, float]:
        return self._scale(self._rng(index).random(len(self.names)))


def test_a_sampler_without_min_observations_needs_one_loss() -> None:
    line = unfed_line(drawn(Worst(BOUNDS), 3), None)
    assert line is not None and "adapts from 1 on" in line and "at each reduction" in line
    assert unfed_line(drawn(Worst(BOUNDS), 3, observed_before=1), None) is None
