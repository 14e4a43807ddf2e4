"""The bounds a sampler accepts, and those it refuses (`launcher.sampler_bounds`).

One table of what a user may write for a parameter's bound: each accepted form with the
box it gives, each refused one with the message, which names the parameter, the value
given and the fix. Refused when the sampler is built, for every kind: before a launcher
could start a simulation. A resume whose bounds changed is refused as before, one whose
bounds are the same numbers written another way (a list for a tuple) is not.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.study_change import StudyChanged, check_resume
from melissa_trainer.launcher.study_record import StudyRecord

KINDS = ["uniform", "lhs", "halton", "sobol", "breed", "surrogate", "density"]

#: bound given for "nu" -> ((low, high) kept, drawn on a log scale)
ACCEPTED: list[tuple[str, Any, tuple[float, float], bool]] = [
    ("a pair", (0.1, 1.0), (0.1, 1.0), False),
    ('"linear", the default scale, spelt out', (0.1, 1.0, "linear"), (0.1, 1.0), False),
    ('"log"', (0.1, 1.0, "log"), (0.1, 1.0), True),
    ("a list pair (JSON, YAML)", [0.1, 1.0], (0.1, 1.0), False),
    ('a list with "log"', [0.1, 1.0, "log"], (0.1, 1.0), True),
    ("ints", (0, 3), (0.0, 3.0), False),
    ("numpy numbers", (np.float64(0.1), np.int64(3)), (0.1, 3.0), False),
    ("a numpy array", np.array([0.1, 1.0]), (0.1, 1.0), False),
    ("low == high: a fixed parameter", (0.5, 0.5), (0.5, 0.5), False),
    ("low == high on a log scale", (0.5, 0.5, "log"), (0.5, 0.5), True),
]

#: bound given for "nu" -> the message (a regex) refusing it
REFUSED: list[tuple[str, Any, str]] = [
    ('"Log"', (0.1, 1.0, "Log"), r"'nu' end with the scale 'Log' \(did you mean \"log\"\?"),
    ('"LOG"', (0.1, 1.0, "LOG"), r"'nu' end with the scale 'LOG' \(did you mean \"log\"\?"),
    ('"logarithmic"', (0.1, 1.0, "logarithmic"), r"'logarithmic' \(did you mean \"log\"\?"),
    ('"Linear"', (0.1, 1.0, "Linear"), r"'nu' end with the scale 'Linear' \(did you mean \"linear"),
    ("an unknown scale", (0.1, 1.0, "cubic"), r"'cubic': the scale is \"linear\" .* or \"log\""),
    ("a number for the scale", (0.1, 1.0, 2.0), r"'nu' end with the scale 2.0: the scale is"),
    ("None for the scale", (0.1, 1.0, None), r"'nu' end with the scale None: the scale is"),
    ("one element", [0.1], r"'nu' are \[0.1\], 1 element\(s\) where 2 or 3 are expected"),
    ("four elements", [0.1, 1.0, "log", 2], r"'nu' are .*, 4 element\(s\) where 2 or 3"),
    ("five elements", (0.1, 1.0, 2.0, 3.0, 4.0), r"5 element\(s\) where 2 or 3"),
    ("a number", 0.5, r"'nu' are the float 0.5: give a tuple or list \(low, high\)"),
    ("a string", "0.1,1", r"'nu' are the str '0.1,1': give a tuple or list"),
    ("bytes", b"\x00\x01", r"'nu' are the bytes .*: give a tuple or list"),
    ("a set (no order)", {0.1, 1.0}, r"'nu' are the set .*: give a tuple or list"),
    ("a dict", {"low": 0.1, "high": 1.0}, r"'nu' are the dict .*: give a tuple or list"),
    ("a string low", ("0.1", 1.0), r"'nu': low='0.1' \(str\) is not a number.*give the number 0.1 "
     r"without quotes"),
    ("a string high", (0.1, "1"), r"'nu': high='1' \(str\) is not a number"),
    ("a word", ("small", 1.0), r"low='small' \(str\) is not a number, in .*; give a number$"),
    ("None", (None, 1.0), r"low=None \(NoneType\) is not a number"),
    ("bools", (False, True), r"'nu': low=False \(bool\) is not a number"),
    ("a bool high", (0.0, True), r"'nu': high=True \(bool\) is not a number"),
    ("a numpy bool", (np.bool_(False), 1.0), r"low=.*False.* \(bool_?\) is not a number"),
    ("NaN", (float("nan"), 1.0), r"'nu': low=nan is not finite, in \(nan, 1.0\); .*give finite"),
    ("an infinite high", (0.0, float("inf")), r"'nu': high=inf is not finite"),
    ("-inf on a log scale", (-float("inf"), 1.0, "log"), r"'nu': low=-inf is not finite"),
    ("low > high", (2.0, 1.0), r"'nu' need low <= high, not low=2 > high=1 \(given \(2.0, 1.0\)\): "
     r"swap them, \(1.0, 2.0\)"),
    ("low > high on a log scale", [2, 1, "log"], r"swap them, \(1, 2, 'log'\)"),
    ("low <= 0 on a log scale", (0.0, 1.0, "log"), r"'nu' are on a log scale but low=0: .*raise"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("bound", "box", "log"), [row[1:] for row in ACCEPTED], ids=[row[0] for row in ACCEPTED]
)
def test_an_accepted_bound_gives_its_box(bound: Any, box: tuple[float, float], log: bool) -> None:
    for kind in KINDS:
        sampler: Any = make_sampler(kind, {"nu": bound, "a": (0.0, 1.0)}, seed=1)
        assert sampler.bounds == {"nu": box, "a": (0.0, 1.0)}
        assert all(isinstance(v, float) for v in sampler.bounds["nu"])
        assert sampler.log_scale == (("nu",) if log else ())
        sampler.plan(4)
        for _ in range(4):
            assert box[0] <= sampler.draw()["nu"] <= box[1]


@pytest.mark.parametrize(
    ("bound", "message"), [row[1:] for row in REFUSED], ids=[row[0] for row in REFUSED]
)
def test_a_bad_bound_is_refused_naming_the_parameter_the_value_and_the_fix(
    bound: Any, message: str
) -> None:
    for kind in KINDS:
        with pytest.raises(ValueError, match=message) as refused:
            make_sampler(kind, {"a": (0.0, 1.0), "nu": bound}, seed=1)
        assert str(refused.value).startswith("bounds of 'nu'")


@pytest.mark.parametrize("bounds", [None, {}, [("nu", (0.0, 1.0))]])
def test_bounds_that_are_not_a_mapping_are_refused(bounds: Any) -> None:
    with pytest.raises(
        ValueError, match=r"bounds must be a non-empty mapping \{name: \(low, high\)"
    ):
        make_sampler("sobol", bounds)


def study(bounds: Any) -> StudyRecord:
    sampler = make_sampler("sobol", bounds, seed=1)
    sampler.plan(6)  # as the launcher does
    return StudyRecord(sampler, 6, max_restarts=0, on_failure="raise", max_redraws=0,
                       first_simulation_id=0)  # fmt: skip


def saved_state(record: StudyRecord) -> dict[str, Any]:
    """The launcher state a checkpoint holds after two draws (through JSON, as saved)."""
    for _ in range(2):
        record.take(0.0)
    return json.loads(json.dumps(record.state_dict()))


def test_a_resume_with_the_same_bounds_written_as_lists_goes_on() -> None:
    state = saved_state(study({"nu": (0.1, 1.0, "log"), "a": (0, 1)}))
    check_resume(state, study({"nu": [0.1, 1.0, "log"], "a": [0.0, 1.0, "linear"]}))


@pytest.mark.parametrize(
    "new",
    [{"nu": (0.1, 2.0, "log"), "a": (0.5, 1)}, {"nu": (0.1, 1.0, "log"), "a": (0.5, 1, "log")}],
)
def test_a_resume_with_other_bounds_is_still_refused(new: Any) -> None:
    state = saved_state(study({"nu": (0.1, 1.0, "log"), "a": (0.5, 1)}))
    with pytest.raises(StudyChanged, match="(parameter ranges|log-scale parameters) changed"):
        check_resume(state, study(new))
