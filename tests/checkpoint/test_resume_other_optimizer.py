"""A checkpoint of another optimizer (an SGD's, resumed by a script that now builds
Adam, or the reverse) is a `CheckpointError` naming ``optimizer.bin`` and the fix, at
the load (`trainer.checkpointing._same_optimizer`).

Before, torch's `load_state_dict` took the SGD's param groups into the Adam without a
word (their hyperparameters replace the built ones), and the first step failed inside
training with a bare ``KeyError: 'betas'`` (Adam over SGD's groups; ``'momentum'``
the other way)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import small_model
from small_run import on_linear_samples, run_arguments

from melissa_trainer import CheckpointError

pytestmark = pytest.mark.timeout(120)

Build = Callable[[torch.nn.Module], torch.optim.Optimizer]
#: without momentum: no per-parameter state (an SGD's with momentum, loaded into an Adam,
#: already failed the load, naming the files: ``KeyError: 'step'``)
SGD: Build = lambda m: torch.optim.SGD(m.parameters(), lr=1e-2)  # noqa: E731
ADAM: Build = lambda m: torch.optim.Adam(m.parameters(), lr=1e-2)  # noqa: E731


@pytest.mark.parametrize(
    ("first", "then", "missing"),
    [(SGD, ADAM, "betas"), (ADAM, SGD, "momentum")],
    ids=["sgd-then-adam", "adam-then-sgd"],
)
def test_a_checkpoint_of_another_optimizer_is_refused_at_the_load(
    tmp_path: Path, first: Build, then: Build, missing: str
) -> None:
    model = small_model(0)
    on_linear_samples(model, run_arguments(tmp_path / "out", 10), first(model)).train()
    model = small_model(0)
    resumed = on_linear_samples(
        model, run_arguments(tmp_path / "out", 20, resume="latest"), then(model)
    )
    with pytest.raises(CheckpointError) as caught:  # before: KeyError, in the first step
        resumed.train()
    message = str(caught.value)
    kind = type(then(small_model(0))).__name__
    checkpoint = tmp_path / "out" / "checkpoints" / "checkpoint-10"
    assert message.startswith(f"cannot load {checkpoint / 'optimizer.bin'}: "), message
    assert f"another optimizer than your {kind} (param_groups[0].{missing}" in message
    assert "build the model, optimizer and scheduler as the run that wrote it did" in message
    assert caught.value.file == "optimizer.bin"


def test_the_same_optimizer_with_other_values_still_resumes(tmp_path: Path) -> None:
    """Other hyperparameters of the same class are the checkpoint's, with a warning
    (tests/checkpoint/test_resumed_hyperparameters.py): no refusal."""
    model = small_model(0)
    on_linear_samples(model, run_arguments(tmp_path / "out", 10), SGD(model)).train()
    model = small_model(0)
    other = torch.optim.SGD(model.parameters(), lr=0.5, weight_decay=0.1)
    resumed = on_linear_samples(model, run_arguments(tmp_path / "out", 12, resume="latest"), other)
    assert resumed.train().global_step == 12
