"""Hugging Face `Trainer` methods that `OnlineTrainer` lacks are told what replaces them
(user trial htrial46): `trainer.save_model("final")` after `train()`, the first line an
HF user writes, got Python's bare "'OnlineTrainer' object has no attribute
'save_model'", and so did `predict`, `add_callback`, `is_world_process_zero`. One table
(`config.hf_trainer_names.HF_TRAINER_METHODS`) says what to use; the docs' table
(docs/how-to/configuration.md, "From Hugging Face") names the same names."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.config.hf_trainer_names import HF_TRAINER_METHODS
from tests.trainer.test_hf_names import _doc_names

#: the method, and what the error must name
METHODS = [
    ("save_model", "model.safetensors"),
    ("save_model", "trainer.save_checkpoint()"),
    ("predict", "trainer.model"),
    ("add_callback", "hooks=[...]"),
    ("is_world_process_zero", "trainer.is_main_process"),
    ("push_to_hub", "upload_folder"),
]


@pytest.fixture
def trainer(tmp_path: Path) -> OnlineTrainer:
    model = torch.nn.Linear(2, 1)
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none")
    return OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), lr=0.1), train_source=[])


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("method", "named"), METHODS)
def test_a_hugging_face_method_is_told_what_replaces_it(
    trainer: OnlineTrainer, method: str, named: str
) -> None:
    with pytest.raises(AttributeError, match="Hugging Face Trainer's") as raised:
        getattr(trainer, method)
    assert named in str(raised.value)
    assert f"OnlineTrainer has no {method!r}" in str(raised.value)


@pytest.mark.timeout(60)
def test_other_missing_attributes_keep_python_s_error(trainer: OnlineTrainer) -> None:
    with pytest.raises(AttributeError, match="'OnlineTrainer' object has no attribute 'nonsense'"):
        trainer.nonsense  # type: ignore[attr-defined]  # noqa: B018
    assert getattr(trainer, "nonsense", None) is None  # hasattr/getattr defaults still work
    assert trainer.is_main_process  # the real names are untouched


def test_the_docs_table_names_the_code_s_methods() -> None:
    assert _doc_names("| `Trainer` method | `OnlineTrainer` |") == set(HF_TRAINER_METHODS)
