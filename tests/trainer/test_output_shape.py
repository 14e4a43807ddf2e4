"""A model whose outputs do not have the targets' shape, under the default loss: the
first step raises, naming both shapes and the fixes. Torch's `mse_loss` broadcast them
against each other with only a warning, and the run trained to the end on the distance
of every output to every target of its batch (the Navier–Stokes user trial: a model
returning ``(batch, n, n)`` for targets ``(batch, 1, n, n)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.core.sample_losses import check_output_shape

pytestmark = pytest.mark.timeout(120)


class Squeezed(torch.nn.Module):
    """`small_model` returning (batch,) where the targets are (batch, 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = small_model(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)[:, 0]


class SampleLosses(Hook):
    """A listener of the per-sample losses: the step then takes the trainer's other
    default path (`_sample_loss_mean`)."""

    def on_sample_losses(
        self, trainer: Any, state: Any, control: Any, losses: Any, ids: Any
    ) -> None:
        pass


def trainer_of(tmp_path: Path, model: torch.nn.Module, **kwargs: Any) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=1, max_steps=3, report_to="none", disable_progress_bar=True,
        save_at_end=False,
    )  # fmt: skip
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(40, 0)),
        process_sample=xy,
        **kwargs,
    )


@pytest.mark.parametrize("hooks", [[], [SampleLosses()]], ids=["loss", "sample_losses"])
def test_outputs_of_another_shape_stop_the_first_step_naming_both(
    tmp_path: Path, hooks: list[Hook]
) -> None:
    trainer = trainer_of(tmp_path, Squeezed(), hooks=hooks)
    with pytest.raises(ValueError) as info:
        trainer.train()
    message = str(info.value)
    assert "the model's outputs have shape (8,) and the targets (8, 1)" in message
    assert "loss_fn mse_loss would broadcast" in message
    assert "outputs[:, None]" in message  # the same number of values: the hint
    assert trainer.state.global_step == 0  # before any optimizer step


def test_a_loss_fn_of_the_users_may_broadcast(tmp_path: Path) -> None:
    """Another loss_fn is the user's to define: broadcasting may be what it means."""

    def broadcasting(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return ((outputs[:, None] - targets) ** 2).mean()

    trainer = trainer_of(tmp_path, Squeezed(), loss_fn=broadcasting)
    assert trainer.train().global_step == 3


def test_the_check_covers_torchs_elementwise_losses_and_their_modules() -> None:
    outputs, targets = torch.zeros(4, 3), torch.zeros(4, 1, 3)
    for loss in (torch.nn.functional.l1_loss, torch.nn.HuberLoss(), torch.nn.MSELoss()):
        with pytest.raises(ValueError, match=r"outputs have shape \(4, 3\) and the targets"):
            check_output_shape(loss, outputs, targets)
    check_output_shape(torch.nn.functional.mse_loss, targets, targets)  # one shape: fine
    with pytest.raises(ValueError) as info:  # a different number of values: no hint
        check_output_shape(torch.nn.functional.mse_loss, torch.zeros(4, 2), torch.zeros(4, 1))
    assert "outputs[:, None]" not in str(info.value)
