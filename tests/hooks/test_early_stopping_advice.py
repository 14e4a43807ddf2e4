"""The end-of-run diagnosis (`hooks.reuse.data_limited`) says "limited by its data" only
when the data is what it shows (htrial16): a run early-stopped with 174 of its 480
samples in, its validation loss up 23-fold at a learning rate of 2e-2, was told "more
simulations". Each branch on a constructed history: the first is that run's, from its
log (pe_es.log, case es1)."""

from __future__ import annotations

from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.divergence import DIVERGED_GROWTH
from melissa_trainer.hooks.reuse import data_limited

LIMITED = "limited by its data"


def state(evals: list[float], losses: list[float], stream_ended: bool) -> TrainerState:
    """A history of training logs (every 20 steps, 40 samples inserted each) and
    validations at the same steps."""
    history: list[dict[str, float]] = []
    for i, (loss, eval_loss) in enumerate(zip(losses, evals, strict=True)):
        step = 20.0 * (i + 1)
        history.append({"step": step, "loss": loss, "buffer_put": 40.0 * (i + 1)})
        history.append({"step": step, "eval_loss": eval_loss})
    return TrainerState(global_step=20 * len(evals), log_history=history, stream_ended=stream_ended)


def test_the_trial_run_is_told_divergence_and_the_learning_rate_not_more_data() -> None:
    # es1: steps 20, 40, 60, 64 (the stop), 174 inserted, the stream still running
    history: list[dict[str, float]] = [
        {"step": 20.0, "loss": 1.717e4, "buffer_put": 80.0},
        {"step": 20.0, "eval_loss": 0.5955},
        {"step": 40.0, "loss": 1.085, "buffer_put": 112.0},
        {"step": 40.0, "eval_loss": 0.9979},
        {"step": 60.0, "loss": 0.03782, "buffer_put": 160.0},
        {"step": 60.0, "eval_loss": 7.555},
        {"step": 64.0, "loss": 0.02174, "buffer_put": 174.0},
        {"step": 64.0, "eval_loss": 13.68},
    ]
    told = data_limited(TrainerState(global_step=64, log_history=history))
    assert told is not None
    assert LIMITED not in told and "more simulations" not in told
    assert "grew to 13.68 by step 64, 23 times its best" in told
    assert "Lower the learning rate" in told and "--max_grad_norm" in told


def test_divergence_is_said_after_the_stream_ended_too() -> None:
    told = data_limited(state([1.0, 2.0, 30.0], [5.0, 1.0, 0.5], stream_ended=True))
    assert told is not None and LIMITED not in told
    assert "30 times its best" in told and "learning rate" in told


def test_a_run_stopped_before_its_stream_ended_is_told_to_let_the_data_arrive() -> None:
    told = data_limited(state([1.0, 1.2, 1.5], [5.0, 1.0, 0.5], stream_ended=False))
    assert told is not None and LIMITED not in told
    assert "stopped before its stream ended, with 120 samples inserted (all ranks)" in told
    assert "does not show that the study needs more simulations" in told
    assert "--early_stopping_patience" in told


def test_a_run_whose_stream_ended_is_limited_by_its_data() -> None:
    # just under the divergence threshold: fitting, not diverging
    below = 0.99 * DIVERGED_GROWTH
    told = data_limited(state([1.0, 1.2, below], [5.0, 1.0, 0.5], stream_ended=True))
    assert told is not None and LIMITED in told
    assert "more simulations (the launcher's n_simulations), not more reuse" in told


def test_no_diagnosis_while_validation_improves_or_training_loss_does_not_fall() -> None:
    assert data_limited(state([3.0, 2.0, 1.0], [5.0, 1.0, 0.5], stream_ended=False)) is None
    assert data_limited(state([1.0, 3.0, 4.0], [1.0, 1.0, 1.0], stream_ended=True)) is None


def test_a_best_of_zero_is_not_divided_by() -> None:
    told = data_limited(state([0.0, 1.0, 2.0], [5.0, 1.0, 0.5], stream_ended=True))
    assert told is not None and LIMITED in told


def test_the_htrial17_run_without_a_training_loss_before_its_best_is_told_divergence() -> None:
    # heat example, --learning_rate 5e-2, the default --logging_steps 50 and
    # --eval_steps 10, early-stopped at step 40: its only training log is the last
    history: list[dict[str, float]] = [
        {"step": 10.0, "eval_loss": 129.6},
        {"step": 20.0, "eval_loss": 0.5495},
        {"step": 30.0, "eval_loss": 6.14},
        {"step": 40.0, "loss": 5.88, "buffer_put": 500.0},
        {"step": 40.0, "eval_loss": 16.51},
    ]
    told = data_limited(TrainerState(global_step=40, log_history=history))
    assert told is not None and LIMITED not in told and "more simulations" not in told
    assert "grew to 16.51 by step 40, 30 times its best" in told
    assert "training loss fell" not in told  # (nothing logged says so)
    assert "Lower the learning rate" in told and "--max_grad_norm" in told


def test_validation_alone_growing_tenfold_is_divergence_whatever_the_training_loss() -> None:
    flat = data_limited(state([1.0, 30.0, 40.0], [1.0, 1.0, 1.0], stream_ended=True))
    assert flat is not None and "40 times its best" in flat and "learning rate" in flat
    # one validation after the best is enough (an early stop with patience 1)
    once = data_limited(state([1.0, 12.0], [1.0, 1.0], stream_ended=False))
    assert once is not None and "12 times its best" in once


def test_a_training_loss_growing_with_validation_is_divergence_and_both_are_named() -> None:
    told = data_limited(state([1.0, 2.0, 30.0], [0.5, 1.0, 6.0], stream_ended=True))
    assert told is not None and LIMITED not in told
    assert "30 times its best" in told
    assert "the training loss grew from 0.5 (step 20) to 6 (step 60), 12 times its lowest" in told
    assert "training loss fell" not in told and "learning rate" in told


def test_a_training_loss_growing_tenfold_alone_is_divergence() -> None:
    # validation no longer at its best, but far from tenfold: only the training loss says it
    told = data_limited(state([1.0, 0.8, 0.9], [2.0, 0.5, 5.0], stream_ended=True))
    assert told is not None and LIMITED not in told and "validation stopped" not in told
    assert told.startswith("the training loss grew from 0.5 (step 40) to 5 (step 60), 10 times")
    assert "Lower the learning rate" in told


def test_a_training_loss_growing_tenfold_with_validation_at_its_best_is_not_divergence() -> None:
    # the model on held-out data at its best after the growth: not the optimisation
    # (`test_divergence_false_alarms.py`: a user trial told "Lower the learning rate" so)
    assert data_limited(state([1.0, 0.9, 0.8], [2.0, 0.5, 5.0], stream_ended=True)) is None


def test_growth_just_under_the_threshold_is_not_divergence() -> None:
    below = 0.99 * DIVERGED_GROWTH
    assert data_limited(state([1.0, 0.8, 0.9], [2.0, 0.5, 0.5 * below], stream_ended=True)) is None
    assert data_limited(state([1.0, 2.0, below], [1.0, 1.0, 1.0], stream_ended=True)) is None
