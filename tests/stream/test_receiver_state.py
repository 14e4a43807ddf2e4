"""A receiver's record of a simulation survives a checkpoint's JSON (written with sorted
keys) with its parameters in its order (the study's: `stream.schema`): a sample's parameter
vector is in that order."""

from __future__ import annotations

import json

import numpy as np

from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.wire import FieldSpec, Hello

FIELD = FieldSpec("u", np.dtype("<f4"), (3,))


def hello(parameters: dict[str, float]) -> Hello:
    return Hello(7, 0, 1, (FIELD,), parameters)


def test_the_parameter_order_survives_a_sorted_json_round_trip() -> None:
    record = StepLedger.from_hello(hello({"t_initial": 300.0, "t_left": 500.0}))
    state = json.loads(json.dumps(record.to_state(), sort_keys=True))
    restored = StepLedger.from_state(7, state)
    assert list(restored.parameters) == ["t_initial", "t_left"]
    assert restored.param_array.tolist() == [300.0, 500.0]


def test_a_record_of_an_older_checkpoint_takes_the_order_of_the_next_hello() -> None:
    record = StepLedger.from_hello(hello({"t_initial": 300.0, "t_left": 500.0}))
    state = record.to_state()
    state["parameters"] = {"t_initial": 300.0, "t_left": 500.0}  # an object, as before
    state = json.loads(json.dumps(state, sort_keys=True))  # "t_initial" < "t_left" anyway
    state["parameters"] = {"t_left": 500.0, "t_initial": 300.0}  # the order lost
    restored = StepLedger.from_state(7, state)
    assert restored.param_array.tolist() == [500.0, 300.0]
    again = hello({"t_initial": 300.0, "t_left": 500.0})
    assert restored.same_declaration(again)
    restored.order_parameters_as(again.parameters)
    assert restored.param_array.tolist() == [300.0, 500.0]
