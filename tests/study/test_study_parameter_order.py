"""A `Study` whose stream was given ``ReceiverConfig(parameters=...)`` in another order
than its sampler's names is refused at configuration, naming both orders and the fix
(`StreamSource.fill_in`): before (hstop), the study followed the config (each sample's
parameters vector in its order) while a held-out sample built from ``sampler.draw()``
was in the sampler's, so that a model read one parameter as another, silently.

The same names in the sampler's order, or none given (the study fills them in), are
taken; other names are left to the receiver's admission, as before. Oracles: the words
written here, and the sampler's names as given to it."""

from __future__ import annotations

import sys

import pytest

from melissa_trainer import ReceiverConfig, StreamSource, Study
from melissa_trainer.launcher import Launcher, UniformSampler

pytestmark = pytest.mark.timeout(60)

BOUNDS = {"alpha": (0.0, 1.0), "beta": (-1.0, 1.0)}  # the sampler's order: alpha, beta


def launcher() -> Launcher:
    return Launcher([sys.executable, "-c", "pass"], UniformSampler(BOUNDS, seed=3), 2)


def test_parameters_in_another_order_than_the_samplers_are_refused() -> None:
    stream = StreamSource(ReceiverConfig(parameters=["beta", "alpha"]))
    with pytest.raises(ValueError) as caught:
        Study(launcher(), stream)
    said = str(caught.value)
    assert said.startswith(
        "ReceiverConfig(parameters=['beta', 'alpha']) lists the study's parameters in "
        "another order than its sampler's names ['alpha', 'beta']: "
    ), said
    assert "a held-out sample built from sampler.draw() in the second" in said, said
    assert said.endswith(
        "Give ReceiverConfig(parameters=['alpha', 'beta']), the sampler's order, or leave "
        "parameters out: a Study gives its sampler's names"
    ), said


@pytest.mark.parametrize("given", [None, ["alpha", "beta"], ["gamma"]])
def test_the_samplers_order_or_none_or_other_names_are_taken(given: list[str] | None) -> None:
    study = Study(launcher(), StreamSource(ReceiverConfig(parameters=given)))
    expected = ("alpha", "beta") if given is None else tuple(given)
    assert study.stream.config.parameters == expected
