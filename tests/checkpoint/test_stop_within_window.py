"""preemption.md's promise for one process: "Training stops at the next stop
synchronisation: at most `--stop_sync_steps` steps later with one process" (the
concepts page: "a stop asked for (or a signal caught) during a window ends training at
that window's end", windows aligned on multiples of `--stop_sync_steps`, a fresh run's
first window one step). The
several-ranks half (at most twice that) is `tests/trainer/test_distributed.py`'s stop
asked at step 5 of windows of 4 ending both ranks at step 12. Before this file no test
bounded the one-process stop from above (`test_preemption_trainer.py` checks only that
it stops at or after the signal's step)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples
from preemption_runs import make_trainer

from melissa_trainer import Hook, Preempted, TrainerControl, TrainerState

pytestmark = pytest.mark.timeout(60)

WINDOW = 4  # --stop_sync_steps


class SignalAt(Hook):
    """SIGTERMs this process at the end of step `step` (once)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize("at", [1, 3, 5, 6])
def test_a_signal_stops_one_process_at_its_windows_end(tmp_path: Path, at: int) -> None:
    """A SIGTERM caught at the end of step `at` stops training at the end of the window
    holding `at`: step 1 (the first window), else the next multiple of `WINDOW`; at
    most `WINDOW` steps after `at`, with 400 samples (50 steps) to train."""
    hook = SignalAt(at)
    trainer = make_trainer(
        tmp_path / "out", list(linear_samples(400)), [hook],
        stop_sync_steps=WINDOW, save_at_end=False,
    )  # fmt: skip
    with pytest.raises(Preempted) as info:
        trainer.train()
    stopped = info.value.step
    assert trainer.state.global_step == stopped
    assert at <= stopped <= at + WINDOW, (at, stopped)
    window_end = 1 if at == 1 else -(-at // WINDOW) * WINDOW
    assert stopped == window_end, (at, stopped)
