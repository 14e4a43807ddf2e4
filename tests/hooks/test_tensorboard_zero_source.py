"""TensorBoard writes a source counter (``source_*``) from its first non-zero value on
(trial 5's F11: a healthy run's board had 25 ``source/rejected_*`` tags that stayed 0),
by the console's rule (`progress.zero_source_figure`); read back with TensorBoard's own
reader. The other figures are written at every log, zero or not."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from melissa_trainer import TrainerControl, TrainerState
from melissa_trainer.hooks.tensorboard import TensorBoardHook

pytestmark = pytest.mark.timeout(60)


def test_a_source_counter_is_written_from_its_first_non_zero_value_on(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    stats = SimpleNamespace(reuse_histogram={})
    trainer = SimpleNamespace(is_main_process=True, buffer=SimpleNamespace(stats=lambda: stats))
    state, control = TrainerState(), TrainerControl()
    hook = TensorBoardHook(str(tmp_path / "runs"))
    hook.on_train_start(trainer, state, control)  # type: ignore[arg-type]
    logs = [
        {"loss": 0.0, "source_messages": 5.0, "source_rejected_a": 0.0, "source_rejected_b": 0.0},
        {"loss": 0.5, "source_messages": 9.0, "source_rejected_a": 2.0, "source_rejected_b": 0.0},
        {"loss": 0.25, "source_messages": 9.0, "source_rejected_a": 0.0, "source_rejected_b": 0.0},
    ]
    try:
        for step, log in enumerate(logs, start=1):
            state.global_step = step
            hook.on_log(trainer, state, control, log)  # type: ignore[arg-type]
    finally:
        hook.close()
    acc = EventAccumulator(str(tmp_path / "runs"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "source/rejected_b" not in tags  # 0 throughout: never written
    points = {tag: [(p.step, p.value) for p in acc.Scalars(tag)] for tag in tags}
    assert points["source/rejected_a"] == [(2, 2.0), (3, 0.0)]  # from its first non-zero on
    assert points["source/messages"] == [(1, 5.0), (2, 9.0), (3, 9.0)]
    assert points["train/loss"] == [(1, 0.0), (2, 0.5), (3, 0.25)]  # a zero that is no counter
