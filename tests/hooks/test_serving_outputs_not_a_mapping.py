"""A `process_outputs` that returns the model's output as it is (a tensor, a tuple)
instead of named tensors: found by a user trial (htrial27, 2026-12-02), where
``ServingHook(..., process_outputs=lambda out: out)`` refused every request `failed`
with ``AttributeError: 'Tensor' object has no attribute 'items'``, raised inside the
library (`Inference.run`), naming neither `process_outputs` nor the fix. The project's
rule: an error names the field and the fix; the other output checks of `Inference.run`
say ``process_outputs: ...`` (a ValueError), so this one should too.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from melissa_trainer.hooks.inference import Inference
from melissa_trainer.wire.messages import FieldSpec


def _trainer(model: torch.nn.Module) -> Any:
    """The parts of a trainer `Inference.run` reads: its model and accelerator."""
    accelerator = SimpleNamespace(
        device=torch.device("cpu"),
        autocast=contextlib.nullcontext,
        unwrap_model=lambda m: m,
    )
    return SimpleNamespace(model=model, accelerator=accelerator)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("process_outputs", [lambda y: y, lambda y: (y,)], ids=["tensor", "tuple"])
def test_outputs_that_are_not_named_tensors_name_process_outputs(process_outputs: Any) -> None:
    inference = Inference([FieldSpec("u", np.dtype("float32"), (4,))], None, process_outputs)
    with pytest.raises(ValueError, match=r"process_outputs.*(mapping|dict)"):
        inference.run(_trainer(torch.nn.Linear(4, 4)), [{"u": np.zeros(4, np.float32)}])
