"""`melissa_trainer.common.checks`: the shared checks of counts and durations."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from melissa_trainer.common.checks import (
    as_count,
    as_int,
    check_count,
    check_non_negative_int,
    check_positive_int,
    check_seconds,
    count_problem,
)

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("value", "numpy", "floats", "expected"),
    [
        (3, False, False, 3),
        (True, True, True, None),  # a bool is never an integer
        (np.int64(3), False, False, None),
        (np.int64(3), True, False, 3),
        (3.0, True, False, None),
        (3.0, False, True, 3),
        (3.5, True, True, None),
        ("3", True, True, None),
        (None, True, True, None),
    ],
)
def test_as_int(value: Any, numpy: bool, floats: bool, expected: int | None) -> None:
    got = as_int(value, numpy=numpy, floats=floats)
    assert got == expected and (got is None or type(got) is int)


def test_int_family_messages() -> None:
    assert check_count("n", 2, 2) == 2
    with pytest.raises(ValueError, match=r"^n must be an int >= 2 \(why\), not 1$"):
        check_count("n", 1, 2, "why")
    with pytest.raises(ValueError, match=r"^n must be an int >= 0, not 1.0$"):
        check_count("n", 1.0, 0)
    with pytest.raises(ValueError, match=r"^b must be a positive int, not True$"):
        check_positive_int("b", True)
    with pytest.raises(ValueError, match=r"^s must be a non-negative int, not np.int64\(1\)$"):
        check_non_negative_int("s", np.int64(1))
    assert check_non_negative_int("s", np.int64(1), numpy=True) == 1


def test_integer_family_message_and_options() -> None:
    assert as_count("c", 4.0, 1) == 4 and as_count("c", np.int32(4), 1) == 4
    with pytest.raises(ValueError, match=r"^c must be an integer >= 1, got 0$"):
        as_count("c", 0, 1)
    with pytest.raises(ValueError, match=r"^c must be an integer >= 0, got 4.0$"):
        as_count("c", 4.0, 0, floats=False)
    with pytest.raises(ValueError, match=r"^c must be an integer >= 0, got np.int32\(4\)$"):
        as_count("c", np.int32(4), 0, numpy=False, floats=False)


def test_count_problem() -> None:
    assert count_problem("k", 1) is None and count_problem("k", None, 1, "use all") is None
    assert count_problem("k", 0) == "k=0 must be a positive integer: set k >= 1"
    assert count_problem("k", -1, 0, "use all") == (
        "k=-1 must be an integer >= 0: set k >= 0, or leave it unset (None) to use all"
    )
    assert count_problem("k", None) == "k=None must be a positive integer: set k >= 1"


def test_check_seconds() -> None:
    assert check_seconds("t", None) is None and check_seconds("t", 0) == 0
    with pytest.raises(ValueError, match=r"^t must be None \(no bound\) or a number of seconds"):
        check_seconds("t", -1)
    with pytest.raises(ValueError, match=r"^t must be a number of seconds >= 0, not None$"):
        check_seconds("t", None, none=False)
    with pytest.raises(ValueError, match="not True"):
        check_seconds("t", True)
