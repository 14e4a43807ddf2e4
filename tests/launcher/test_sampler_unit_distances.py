"""The options measured in the unit cube (`avoid` of "surrogate" and "breed", `spacing`
of "surrogate") are checked against the cube's diagonal over the *varying* parameters,
sqrt(v) (user trial 31, LOW): a fixed parameter (low == high) adds no length. Before,
every name counted: one varying parameter of two accepted up to sqrt(2), a distance no
two draws can have. The refusal names the option, its range and the varying
parameters."""

from __future__ import annotations

import math

import pytest

from melissa_trainer import make_sampler

pytestmark = pytest.mark.timeout(60)

#: one varying parameter (c) of two
LINE = {"nu": (0.01, 0.01), "c": (0.1, 1.0)}
CUBE = {"a": (0.0, 1.0), "b": (0.0, 2.0), "c": (1.0, 10.0, "log"), "d": (3.0, 3.0)}


@pytest.mark.parametrize(
    ("kind", "option"), [("surrogate", "spacing"), ("surrogate", "avoid"), ("breed", "avoid")]
)
def test_one_varying_parameter_of_two_allows_at_most_1(kind: str, option: str) -> None:
    make_sampler(kind, LINE, **{option: 1.0})  # the whole line: accepted
    pattern = (
        rf"^{option} must be finite and in \[0.0, 1.0\], "
        r"not 1.2: a distance in the unit cube over the 1 varying parameter \(c; a fixed "
        r"one, low == high, does not count\), whose diagonal is 1$"
    )
    with pytest.raises(ValueError, match=pattern):
        make_sampler(kind, LINE, **{option: 1.2})


@pytest.mark.parametrize("option", ["spacing", "avoid"])
def test_three_varying_of_four_allow_sqrt_3(option: str) -> None:
    make_sampler("surrogate", CUBE, **{option: math.sqrt(3)})
    with pytest.raises(ValueError, match=rf"{option} must be .* 3 varying parameters \(a, b, c;"):
        make_sampler("surrogate", CUBE, **{option: 1.8})


def test_with_every_parameter_fixed_the_defaults_are_accepted() -> None:
    # no varying parameter: the range of one ([0, 1]), the options without effect
    fixed = {"nu": (0.01, 0.01), "c": (0.5, 0.5)}
    make_sampler("surrogate", fixed)
    make_sampler("breed", fixed, avoid=1.0)
    with pytest.raises(ValueError, match=r"over no varying parameter \(every one fixed"):
        make_sampler("surrogate", fixed, spacing=1.5)
