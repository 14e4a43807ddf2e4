"""What `process_outputs` returns is checked whole: each output of shape
``(batch, *declared shape)`` (`ServingHook(outputs=...)`), or, none declared, of first
dimension the batch for two batch sizes unlike any declared dimension (a probe of
zero-valued requests at TRAIN_START), the error naming ``ServingHook.process_outputs``,
the shape returned and the shape required.

Before: only the first dimension was checked, at each served batch. A
``process_outputs`` that dropped the batch dimension (``out[0]``) was answered, wrong,
whenever the batch equalled its first dimension (two requests of a model of 2 outputs:
each got one number of the first request's answer), and refused ``failed`` request by
request otherwise, for the whole run; training started and went on all the same.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples

from melissa_trainer import Hook, OnlineTrainer, ServingHook, TrainingArguments
from melissa_trainer.client import Predictor, PredictRefused
from melissa_trainer.hooks.serving_checks import check_outputs, declared_outputs, probe_sizes
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.timeout(120)

INPUTS = {"x": ((3,), "float32")}


def train(tmp_path: Path, serving: ServingHook, *hooks: Hook, out: int = 2) -> OnlineTrainer:
    """A trainer of ``Linear(3, out)`` (8 steps of 8 samples), `serving` and `hooks`."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, out)
    return OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(tmp_path), batch_size=8, buffer="fifo",
                          disable_progress_bar=True, report_to="none", save_at_end=False),
        torch.optim.SGD(model.parameters(), lr=0.0),
        train_source=list(linear_samples(64)),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.zeros(out)),
        hooks=[serving, *hooks],
    )  # fmt: skip


class Started(Hook):
    """Records whether a step ran."""

    stepped = False

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.stepped = True


def test_a_dropped_batch_dimension_equal_to_the_batch_fails_at_the_start(tmp_path: Path) -> None:
    """``out[0]`` of a model of 2 outputs: shape (2,), which a batch of 2 requests took
    for its rows (before: answered, wrong). The probe's second size (4: no declared
    dimension is 4) catches it at TRAIN_START, before any step."""
    assert probe_sizes(field_specs(INPUTS), None) == [2, 4]
    started = Started()
    serving = ServingHook(INPUTS, process_outputs=lambda y: {"y": y[0]})
    with pytest.raises(ValueError) as caught:
        train(tmp_path, serving, started).train()
    assert str(caught.value) == (
        "ServingHook.process_outputs returned 'y' of shape (2,) for a batch of 4 requests; "
        "required a tensor of shape (4, ...) (one row per request, the batch first)"
    )
    assert not started.stepped


def test_declared_outputs_are_checked_whole_at_the_start(tmp_path: Path) -> None:
    """A (batch, 6) output where (2, 3) per request is declared: its first dimension is
    the batch, which passed before; now the declared shape is required (the probe's
    batch: 4, the first size that is no declared dimension, 2, 3 or 3)."""
    serving = ServingHook(
        INPUTS, process_outputs=lambda y: {"y": y}, outputs={"y": ((2, 3), "float32")}
    )
    with pytest.raises(ValueError) as caught:
        train(tmp_path, serving, out=6).train()
    assert str(caught.value) == (
        "ServingHook.process_outputs returned 'y' of shape (4, 6) for a batch of 4 requests; "
        "required a tensor of shape (4, 2, 3) (batch, *declared (2, 3): one row per "
        "request, the batch first)"
    )


def test_declared_outputs_pass_and_are_sent_as_declared(tmp_path: Path) -> None:
    """The right shape serves: a (batch, 2, 3) output declared (2, 3) float64 is
    answered as a float64 (2, 3) array per request, over the socket."""
    serving = ServingHook(
        INPUTS,
        process_inputs=lambda s: torch.from_numpy(s["x"].copy()),
        process_outputs=lambda y: {"y": y.reshape(-1, 2, 3)},
        outputs={"y": ((2, 3), "float64")},
        bind="tcp://127.0.0.1:*",
    )
    got: dict[str, Any] = {}

    class AskFirst(Hook):
        def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
            with Predictor(0, endpoint=serving.endpoint) as predictor:  # (the idle thread)
                got["answer"] = predictor.predict({"x": np.ones(3, np.float32)}, timeout=60)

    train(tmp_path, serving, AskFirst(), out=6).train()
    outputs, version = got["answer"]
    assert version == 0 and outputs["y"].shape == (2, 3) and outputs["y"].dtype == np.float64


def test_a_probe_that_raises_is_skipped_and_the_request_is_refused_with_the_shapes(
    tmp_path: Path,
) -> None:
    """A `process_inputs` that cannot take zeros: the probe is skipped (logged) and the
    first served request gets the shape error as its refusal's detail, over the
    socket: an answer, not a timeout."""

    def process_inputs(s: Any) -> torch.Tensor:
        if not s["x"].any():
            raise ZeroDivisionError("the user's normalisation")
        return torch.from_numpy(s["x"] / np.abs(s["x"]).sum())

    serving = ServingHook(
        INPUTS,
        process_inputs=process_inputs,
        process_outputs=lambda y: {"y": y[0]},
        outputs={"y": ((2,), "float32")},
        bind="tcp://127.0.0.1:*",
    )
    got: list[Any] = []

    class AskFirst(Hook):
        def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
            def ask() -> None:
                with Predictor(0, endpoint=serving.endpoint) as predictor:
                    try:
                        predictor.predict({"x": np.ones(3, np.float32)}, timeout=60)
                    except PredictRefused as exc:
                        got.append(exc)

            thread = threading.Thread(target=ask)
            thread.start()
            thread.join(90)

    state = train(tmp_path, serving, AskFirst()).train()
    assert state.global_step == 8  # (training goes on, as after any failed inference)
    (refused,) = got
    assert refused.reason == "failed"
    assert refused.detail == (
        "ValueError: ServingHook.process_outputs returned 'y' of shape (2,) for a batch of "
        "1 request; required a tensor of shape (1, 2) (batch, *declared (2,): one row per "
        "request, the batch first)"
    )


@pytest.mark.parametrize(
    ("named", "said"),
    [
        (
            {"z": torch.zeros(2, 3)},
            "returned the outputs ['z']; ServingHook.outputs declares ['y']",
        ),
        ({"y": torch.zeros(3)}, "'y' of shape (3,) for a batch of 2 requests"),
        ({"y": np.zeros((2, 3))}, "'y' ndarray for a batch of 2 requests"),
    ],
)
def test_check_outputs_names_the_difference(named: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match="ServingHook.process_outputs") as caught:
        check_outputs(named, 2, declared_outputs({"y": ((3,), "float32")}))
    assert said in str(caught.value)


def test_probe_sizes_avoid_every_declared_dimension() -> None:
    inputs = field_specs({"a": ((2, 3), "float32"), "b": ((5,), "int32")})
    assert probe_sizes(inputs, None) == [4, 6]
    assert probe_sizes(inputs, field_specs({"y": ((4,), "float32")})) == [6]


@pytest.mark.parametrize("outputs", [{}, [("y", (3,))], {"y": ((3,), "flaot32")}])
def test_bad_outputs_are_refused_at_construction(outputs: Any) -> None:
    with pytest.raises(ValueError, match=r"^ServingHook\.outputs"):
        ServingHook(INPUTS, outputs=outputs)


@pytest.mark.parametrize("returned", ["tensor", "tuple"])
def test_outputs_not_a_mapping_fail_at_the_start(tmp_path: Path, returned: str) -> None:
    """``process_outputs`` returning the model's output as it is (a tensor, a tuple), not
    ``{name: tensor}``: true of every request, so the probe at TRAIN_START raises it,
    before any step. Before: the probe skipped it (an INFO line), training ran, and every
    request of the run was refused ``failed``, the study ending 0 (user trial 39)."""
    started = Started()
    shape = (lambda y: y) if returned == "tensor" else (lambda y: (y,))
    serving = ServingHook(INPUTS, process_outputs=shape)
    with pytest.raises(ValueError) as caught:
        train(tmp_path, serving, started).train()
    assert str(caught.value) == (
        "ServingHook.process_outputs must return a mapping of output names to tensors "
        f"(e.g. {{'prediction': output}}), not {returned}"
    ).replace("not tensor", "not Tensor")
    assert not started.stepped
