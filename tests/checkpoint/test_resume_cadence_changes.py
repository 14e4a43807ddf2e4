"""A resume that changes only how often the run logs or saves (``logging_steps``,
``save_steps``...) is not told "not the run that checkpoint's would have been": those
settings change no step, batch or weight (before, they were named like a batch size).
Settings that do change training are still named."""

from __future__ import annotations

from melissa_trainer import TrainingArguments
from melissa_trainer.checkpoint.resumed_args import changed_settings


def test_cadence_changes_are_not_named_training_changes_are() -> None:
    saved = TrainingArguments(logging_steps=50, save_steps=5, eval_steps=10).to_dict()
    current = TrainingArguments(
        logging_steps=20,
        save_steps=None,
        save_at_end=False,
        max_to_keep=1,
        on_save_error="continue",
        stage_batches=False,
        ddp_find_unused_parameters=True,
        eval_steps=5,  # validations drive early stopping: named
        batch_size=16,
    ).to_dict()
    assert changed_settings(saved, current) == ["batch_size 32 -> 16", "eval_steps 10 -> 5"]
