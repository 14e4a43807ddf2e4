"""A Hugging Face `TrainerCallback` ported as a `Hook` (htrial9): a first parameter named
``args`` (HF's TrainingArguments; here the trainer) is warned of when the hook is added,
naming ``trainer.args`` (before: "'OnlineTrainer' object has no attribute
'logging_steps'" at the first log); HF `TrainerState` fields (``state.epoch``,
``state.is_world_process_zero``) name what to read here (before: bare AttributeErrors)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from melissa_trainer import Hook, TrainerState
from melissa_trainer.hooks.base import HookList


class Ported(Hook):
    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        pass


class Native(Hook):
    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        pass


def test_a_first_parameter_named_args_is_warned_of() -> None:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        HookList([Ported()])
    said = [str(w.message) for w in got]
    # Both of HF's habits are named, each once: the first parameter and **kwargs
    # (pytest.warns would re-emit the second into the run's warnings summary).
    args = [m for m in said if "first parameter is named 'args'" in m]
    kwargs = [m for m in said if "takes **kwargs" in m]
    assert len(args) == 1 and len(kwargs) == 1 and len(said) == 2, said
    assert "rename it trainer and read trainer.args" in args[0]


def test_a_hook_s_own_names_say_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HookList([Native()])


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("epoch", "state.pseudo_epoch"),
        ("is_world_process_zero", "trainer.is_main_process"),
        ("logging_steps", "trainer.args.logging_steps"),
        # newer transformers' fields (htrial44: a bare AttributeError before)
        ("best_global_step", "state.best_step"),
        ("num_input_tokens_seen", "state.total_samples_seen"),
        ("stateful_callbacks", "state_dict()"),
    ],
)
def test_hugging_face_state_fields_name_what_to_read(field: str, said: str) -> None:
    with pytest.raises(AttributeError, match="Hugging Face's") as caught:
        getattr(TrainerState(), field)
    assert said in str(caught.value)


def test_other_missing_attributes_stay_plain() -> None:
    with pytest.raises(AttributeError, match="'TrainerState' object has no attribute 'nope'"):
        TrainerState().nope  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(TrainerState(), "epoch")


class KeywordsReader(Hook):
    """HF's habit: the model from the callback's keywords, None here (no keywords)."""

    def on_step_end(self, trainer: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.model = kwargs.get("model")


def test_a_method_taking_kwargs_is_warned_of() -> None:
    # htrial44: kwargs.get("model") was None, silently: the trainer passes no keywords
    with pytest.warns(UserWarning, match=r"KeywordsReader\.on_step_end takes \*\*kwargs") as got:
        HookList([KeywordsReader()])
    assert "read trainer.model" in str(got[0].message)


class Generic(Hook):
    """A generic wrapper's signature: no keyword is expected of it, nothing to warn."""

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_a_generic_signature_says_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HookList([Generic()])
