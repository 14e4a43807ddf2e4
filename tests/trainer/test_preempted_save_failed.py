"""A preemption whose checkpoint could not be written (``on_save_error="continue"``)
never names a checkpoint path that was not written: `Preempted.checkpoint` is None and
its line says what ``latest`` resumes from (the last checkpoint written, or none). Before,
it named ``checkpoint-<step>`` whatever the save did (hfinal's leftover, stop 65).

The failure is real: at the signal's step a hook turns the checkpoint directory into a
plain file, so the save's staging directory cannot be made (NotADirectoryError)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, Preempted, TrainingArguments
from melissa_trainer.common.checkpoint_names import list_checkpoints
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState


class SpoilAndSignal(Hook):
    """At step `step`: the checkpoint root replaced by a file, then SIGTERM to itself."""

    def __init__(self, root: Path, step: int) -> None:
        self.root, self.step = root, step

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == self.step:
            if self.root.exists():  # (the earlier checkpoints, kept for the test)
                shutil.move(self.root, self.root.with_name("kept"))
            self.root.write_text("not a directory")
            os.kill(os.getpid(), signal.SIGTERM)


def make_trainer(out: Path, hooks: list[Hook], **overrides: Any) -> OnlineTrainer:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    options: dict[str, Any] = dict(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=8,
        stop_sync_steps=2,
        logging_steps=1000,
        report_to="none",
        disable_progress_bar=True,
        on_save_error="continue",
        save_at_end=False,
    )
    model = small_model()
    return OnlineTrainer(
        model,
        TrainingArguments(**{**options, **overrides}),
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(400)),
        process_sample=xy,
        hooks=hooks,
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("earlier", [True, False], ids=["after-a-save", "no-save-before"])
def test_a_preemption_whose_save_failed_names_no_unwritten_checkpoint(
    tmp_path: Path, earlier: bool
) -> None:
    out = tmp_path / "out"
    root = out / "checkpoints"
    save_steps = 2 if earlier else None
    trainer = make_trainer(out, [SpoilAndSignal(root, 3)], save_steps=save_steps)
    with pytest.raises(Preempted) as info:
        trainer.train()
    step = info.value.step
    assert step >= 3 and info.value.code == 143
    assert not (root.with_name("kept") / f"checkpoint-{step}").exists()  # (the oracle)
    assert root.is_file()  # the save could not have written anything under it
    assert info.value.checkpoint is None
    said = str(info.value)
    assert f"checkpoint-{step}" not in said, said
    assert "its checkpoint could not be written" in said, said
    if earlier:
        assert [p.name for p in list_checkpoints(root.with_name("kept"))] == ["checkpoint-2"]
        assert info.value.resume_from == 2
        assert "starts from step 2, the last checkpoint written" in said, said
    else:
        assert info.value.resume_from is None
        assert "no earlier checkpoint: a resume starts afresh" in said, said
