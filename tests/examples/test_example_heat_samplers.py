"""The heat example offers every sampler `make_sampler` builds (`--sampler`), the
surrogate acquisition included (the guide's choice for the worst cases at 2-3
parameters); the run with it: `test_example_heat.py`'s runs of the other adaptive ones
take the same path (`study_common.study_source`)."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from melissa_trainer.launcher.samplers import _KINDS

EXAMPLE = Path(__file__).parents[2] / "examples" / "heat_pde" / "train.py"


def test_the_heat_example_offers_every_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("heat_train_choices", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # (its dataclasses look it up)
    monkeypatch.setattr(sys, "path", list(sys.path))  # (it adds examples/ to the path)
    spec.loader.exec_module(module)
    (sampler,) = (f for f in dataclasses.fields(module.HeatArgs) if f.name == "sampler")
    assert set(sampler.metadata["choices"]) == {*_KINDS, "breed", "density", "surrogate"}
