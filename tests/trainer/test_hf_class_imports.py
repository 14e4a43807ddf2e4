"""`transformers` class names imported from this package are told what replaces them
(user trial htrial46): a port's ``from melissa_trainer import TrainerCallback`` (its
``from transformers import ...`` with the package renamed) got Python's bare "cannot
import name 'TrainerCallback' from 'melissa_trainer'", naming nothing to use. One
table, `config.hf_trainer_names.HF_CLASSES`; every replacement it names is exported."""

from __future__ import annotations

import re

import pytest

import melissa_trainer
from melissa_trainer.config.hf_trainer_names import HF_CLASSES


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("TrainerCallback", "Hook"),
        ("Trainer", "OnlineTrainer"),
        ("EarlyStoppingCallback", "EarlyStoppingHook(patience=N)"),
        ("HfArgumentParser", "ArgumentParser"),
    ],
)
def test_importing_a_transformers_class_names_ours(name: str, ours: str) -> None:
    with pytest.raises(ImportError, match="Hugging Face's") as raised:
        exec(f"from melissa_trainer import {name}", {})
    assert f"here: {ours}" in str(raised.value)


def test_each_replacement_is_exported() -> None:
    for said in HF_CLASSES.values():
        first = re.match(r"\w+", said)
        assert first is not None and first.group() in melissa_trainer.__all__, said


def test_other_missing_names_keep_python_s_error() -> None:
    assert not hasattr(melissa_trainer, "nonsense")
    with pytest.raises(ImportError, match="cannot import name 'nonsense'"):
        exec("from melissa_trainer import nonsense", {})
