"""`StudySchema`: one set of fields per study, and a refusal that says what differs."""

from __future__ import annotations

import numpy as np

from melissa_trainer.stream.schema import StudySchema
from melissa_trainer.wire import FieldSpec

T32 = FieldSpec("temperature", np.dtype("<f4"), (32, 32))
T16 = FieldSpec("temperature", np.dtype("<f4"), (16, 16))
P = FieldSpec("pressure", np.dtype("<f8"), (32, 32))


def test_the_first_declaration_is_the_studys_and_others_are_refused_with_the_difference() -> None:
    schema = StudySchema(enforce=True)
    assert schema.admit([T32, P]) is None and schema.admit((T32, P)) is None
    why = schema.admit([T16, P])
    assert why is not None
    assert "field 'temperature' is float32 (16, 16) where the study's is float32 (32, 32)" in why
    assert "field 'pressure' is missing" in (schema.admit([T32]) or "")
    assert "not one of the study's" in (
        schema.admit([T32, P, FieldSpec("u", np.dtype("<f4"), (3,))]) or ""
    )
    assert "in the order" in (schema.admit([P, T32]) or "")


def test_given_fields_win_over_a_checkpoint_and_a_checkpoint_restores_the_first() -> None:
    given = StudySchema([T16])
    given.load_json(StudySchema([T32]).to_json())
    assert given.admit([T16]) is None and given.admit([T32]) is not None
    first = StudySchema(enforce=True)
    first.admit([T32, P])
    restored = StudySchema(enforce=True)
    restored.load_json(first.to_json())
    assert restored.fields == (T32, P) and restored.admit([T16]) is not None


def test_without_a_rule_every_declaration_is_admitted() -> None:
    schema = StudySchema()
    assert schema.admit([T32]) is None and schema.admit([T16]) is None
    assert schema.to_json() is None


def test_given_parameter_names_are_every_simulations() -> None:
    given = StudySchema(parameters=["k", "t0"])  # a Study's sampler names, any order
    assert given.admit([T32], ["t0", "k"]) is None
    why = given.admit([T32], [])
    assert why is not None and why.startswith(
        "HELLO carries no parameters, the study's simulations have ['k', 't0']: it was "
        "started without them (by hand?)"
    )
    assert "MELISSA_TRAINER_PARAMETERS=" in why and "Client(parameters=" in why
    assert "['t0'] missing; ['x'] not the study's" in (given.admit([T32], ["k", "x"]) or "")
    first = StudySchema(enforce=True)  # fields learned; parameter names never are
    assert first.admit([T32], ["a"]) is None and first.admit([T32], []) is None


def test_the_parameters_order_is_the_given_names_else_the_first_admitted() -> None:
    given = StudySchema(parameters=["k", "t0"])  # listed otherwise: admitted, reordered
    assert given.admit([T32], ["t0", "k"]) is None
    assert list(given.arrange({"t0": 1.0, "k": 2.0}).items()) == [("k", 2.0), ("t0", 1.0)]
    learned = StudySchema()  # no names: the first admitted order, the same names
    assert learned.admit([T32], ["t0", "k"]) is None  # in another order refused,
    assert (learned.admit([T32], ["k", "t0"]) or "").startswith("HELLO lists its parameters")
    assert learned.admit([T32], ["x"]) is None  # other names: no rule, their own order
    assert list(learned.arrange({"x": 1.0})) == ["x"]
    restored = StudySchema()
    restored.load_order(learned.order)
    assert restored.admit([T32], ["k", "t0"]) is not None
