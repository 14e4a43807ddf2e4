"""A study stopped before its sampler drew its last simulation (a SIGTERM mid-study) is
not told that its losses came too late, nor to change its settings
(`melissa_trainer.study.feedback`): its draws to come would have held more losses."""

from __future__ import annotations

from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.study.feedback import FeedbackCheck, few_line, unfed_line

BOUNDS = {"a": (0.0, 1.0)}


def check(n_simulations: int) -> FeedbackCheck:
    feedback = FeedbackCheck()
    feedback.started(BreedSampler(BOUNDS, exploration=0.5), n_simulations)
    feedback.loss_steps = 20
    return feedback


def test_a_study_stopped_after_half_its_draws_holding_no_loss_is_not_advised() -> None:
    """The trial's case: 8 of 16 drawn, no loss yet, then SIGTERM."""
    sampler = BreedSampler(BOUNDS, exploration=0.5)
    for _ in range(8):
        sampler.draw()
    assert unfed_line(sampler, 20, 16) is None
    assert check(16).lines(sampler) == []
    # the whole of a 10-simulation study, drawn holding no loss: its losses came late
    for _ in range(2):
        sampler.draw()
    assert unfed_line(sampler, 20, 10) is not None
    assert check(10).lines(sampler) == [unfed_line(sampler, 20, 10)]


def test_a_study_stopped_with_few_adaptive_draws_is_not_advised() -> None:
    sampler = BreedSampler(BOUNDS, exploration=0.5)
    made = [sampler.draw() for _ in range(16)]
    for sid, parameters in enumerate(made[:8]):
        sampler.observe(sid, parameters, float(sid))
    for _ in range(2):  # 18 drawn, 2 adaptive
        sampler.draw()
    assert few_line(sampler, 20, 24) is None
    assert check(24).lines(sampler) == []
    # the whole of an 18-simulation study: 2 of the 10 that could adapt, told
    assert few_line(sampler, 20, 18) is not None
    assert check(18).lines(sampler) == [few_line(sampler, 20, 18)]
