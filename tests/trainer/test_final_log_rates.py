"""The final log's rates are of the training since the last log: the time the
`on_loop_end` hooks take (a study's wait for its last simulations' exits, up to
`STOP_WAIT` s, which now comes before the final log; a user hook's own work) is not
counted in them. Here a hook's `on_loop_end` moves the clock on by 1000 s."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Hook

#: seconds the clock moves on in `on_loop_end`
SLOW = 1000.0


class SlowLoopEnd(Hook):
    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    def on_loop_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.clock[0] += SLOW


@pytest.mark.timeout(60)
def test_the_final_log_does_not_count_the_end_hooks_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    clock = [0.0]
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + clock[0])
    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=8,
            buffer="fifo",
            buffer_size=64,
            watermark=8,
            logging_steps=1000,  # the final log only
            report_to="none",
            disable_progress_bar=True,
            save_at_end=False,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(80)),
        process_sample=xy,
        hooks=[SlowLoopEnd(clock)],
    )
    state = trainer.train()
    final = state.log_history[-1]
    assert state.global_step == 10 and final["step"] == 10, final
    # 10 steps in well under SLOW s: counted with the hook's time, the rate is below 0.01
    assert final["steps_per_second"] > 10 / SLOW, final
    assert final["samples_per_second"] == pytest.approx(8 * final["steps_per_second"]), final
