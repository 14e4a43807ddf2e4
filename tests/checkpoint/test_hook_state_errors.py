"""A resume whose hooks differ from the checkpoint's: the error says what to do about the
hooks (pass the hook, give it its state), not about the model (which does fit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint.errors import CheckpointError

pytestmark = pytest.mark.timeout(120)


class Counting(Hook):
    """A stateful hook: counts its steps, kept across a resume."""

    def __init__(self) -> None:
        self.steps = 0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: Any) -> None:
        self.steps = state["steps"]


def run(out: Path, hooks: list[Hook], **over: Any) -> OnlineTrainer:
    over.setdefault("max_steps", 4)
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        report_to="none",
        disable_progress_bar=True,
        **over,
    )
    model = small_model(0)
    return OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(80, 0)),
        process_sample=xy,
        hooks=hooks,
    )


def resume_error(out: Path, hooks: list[Hook]) -> str:
    with pytest.raises(CheckpointError) as caught:
        run(out, hooks, resume_from_checkpoint="latest").train()
    return str(caught.value)


def test_a_missing_stateful_hook_is_named_with_how_to_pass_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(out, [Counting()]).train()
    message = resume_error(out, [])
    assert "hook 'Counting', which this trainer does not have" in message
    assert "hooks=[...]" in message and "start afresh" in message
    # the model, optimizer and scheduler fit: no advice to rebuild them
    assert "build the model" not in message
    # the hook's own advice replaced "resume without its state", which no option does
    assert "resume without its state" not in message


def test_a_stateless_hook_of_that_name_says_to_give_it_its_state(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(out, [Counting()]).train()

    class Counting2(Hook):  # the same name, without state_dict / load_state_dict
        @property
        def name(self) -> str:
            return "Counting"

    message = resume_error(out, [Counting2()])
    assert "hook Counting has no state but the checkpoint holds {'steps': 4}" in message
    assert "state_dict and load_state_dict" in message and "start afresh" in message
    assert "build the model" not in message


def test_the_same_hooks_resume(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(out, [Counting()]).train()
    hook = Counting()
    run(out, [hook], resume_from_checkpoint="latest").train()
    assert hook.steps == 4  # restored at 4; max_steps 4 trains nothing more


def test_a_hook_added_since_the_checkpoint_starts_afresh(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(out, []).train()
    hook = Counting()
    run(out, [hook], resume_from_checkpoint="latest", max_steps=6).train()
    assert hook.steps == 2  # steps 5 and 6: nothing restored, no error
