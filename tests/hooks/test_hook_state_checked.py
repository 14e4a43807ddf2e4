"""A hook's `state_dict` that no checkpoint can keep (htrial44). A tensor in it failed
the first save, training under way (by default `save_seconds`, 10 minutes in), with
json's "Object of type Tensor is not JSON serializable", naming no hook; a dict with int
keys was saved as string keys and came back so from a resume, silently. Now both are a
TypeError naming the hook, before the first step, and at a save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)


class Stateful(Hook):
    """A hook whose state is `state`, counting the steps it saw."""

    def __init__(self, state: Any) -> None:
        self.state, self.steps = state, 0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return self.state

    def load_state_dict(self, state: Any) -> None:
        self.state = state


def trainer_with(tmp_path: Path, hook: Hook) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        batch_size=8, buffer="fifo", stop_sync_steps=1, save_steps=2, max_steps=4,
    )  # fmt: skip
    model = small_model(0)
    return OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(64)), process_sample=xy, hooks=[hook],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ({"best": torch.tensor(0.5)}, "Tensor is not JSON serializable"),
        ({"counts": {3: 1}}, "state['counts'] has the key 3 (int)"),
    ],
    ids=["tensor", "int-key"],
)
def test_a_state_no_checkpoint_keeps_is_refused_before_the_first_step(
    tmp_path: Path, state: Any, said: str
) -> None:
    hook = Stateful(state)
    with pytest.raises(TypeError, match="hook 'Stateful': its state_dict") as caught:
        trainer_with(tmp_path, hook).train()
    assert said in str(caught.value)
    assert hook.steps == 0  # refused before anything trained
    assert not list((tmp_path / "out").glob("checkpoints/checkpoint-*"))


def test_a_state_that_turns_bad_is_named_at_the_save(tmp_path: Path) -> None:
    class TurnsBad(Stateful):
        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            self.state = {"best": torch.tensor(0.5)}  # fine at the start, then a tensor

    with pytest.raises(Exception, match="hook 'TurnsBad': its state_dict"):
        trainer_with(tmp_path, TurnsBad({"best": 1.0})).train()


def test_a_json_state_is_kept_and_restored(tmp_path: Path) -> None:
    trainer_with(tmp_path, Stateful({"counts": {"3": 1}, "best": float("inf")})).train()
    hook = Stateful({})
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        batch_size=8, buffer="fifo", stop_sync_steps=1, max_steps=4,
        resume_from_checkpoint="latest",
    )  # fmt: skip
    model = small_model(0)
    OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(64)), process_sample=xy, hooks=[hook],
    ).train()  # fmt: skip
    assert hook.state == {"counts": {"3": 1}, "best": float("inf")}
