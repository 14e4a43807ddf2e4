"""`TrainerControl` refuses an attribute that is not one of its flags (trial 5's F2): a
callback ported from Hugging Face setting ``control.should_training_stop = True`` was
accepted, and the run trained to its end. The error names the flag to set instead. The
refusal must not break what a dataclass does: `dataclasses.replace` / `asdict`, copies,
pickling, and the record of who set `should_stop`."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainerControl, TrainingArguments
from melissa_trainer.core.state import TrainerState


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("should_training_stop", r"Hugging Face's flag.*set should_stop"),
        ("should_evaluate", r"Hugging Face's flag.*set should_validate"),
        ("should_epoch_stop", r"no epoch to end early.*should_stop.*should_rewind"),
        ("should_sav", r"did you mean should_save\?"),
        ("anything", r"nothing would read it"),
    ],
)
def test_an_unknown_flag_is_refused_naming_the_one_to_set(name: str, says: str) -> None:
    control = TrainerControl()
    with pytest.raises(AttributeError, match=rf"no flag '{name}': (.*)?{says}"):
        setattr(control, name, True)
    assert not hasattr(control, name)
    assert control.pending() == [] and not control.should_stop


def test_the_flags_still_set_and_a_dataclass_still_copies() -> None:
    control = TrainerControl()
    control.should_log = True
    control.should_stop = True  # who set it is recorded (this test function)
    assert "test_the_flags_still_set" in control.stop_reason
    assert dataclasses.asdict(control)["should_log"] is True
    replaced = dataclasses.replace(control, should_save=True)
    assert replaced.should_save and replaced.should_log and replaced == replaced
    for copied in (copy.copy(control), copy.deepcopy(control), pickle.loads(pickle.dumps(control))):
        assert copied == control and copied.stop_reason == control.stop_reason
        with pytest.raises(AttributeError, match="should_training_stop"):
            copied.should_training_stop = True  # type: ignore[attr-defined]


@pytest.mark.parametrize(("name", "value"), [("clock", None), ("stop_step", 3)])
def test_the_trainers_own_fields_are_refused_to_a_hook(name: str, value: Any) -> None:
    """`stop_step` and `clock` are fields (made with ``clock=``), not flags: a hook's
    write is refused as any unknown flag's is (it was accepted once they joined the
    dataclass's fields, the guard's list), and the stop stays dated by the clock."""
    state = TrainerState(global_step=5)
    control = TrainerControl(clock=state)  # (as the trainer makes it)
    with pytest.raises(AttributeError, match=rf"{name} is the trainer's, not a flag.*should_stop"):
        setattr(control, name, value)
    assert control.clock is state and control.stop_step is None
    control.should_stop = True
    assert control.stop_step == 5  # (dated by the clock, as before)
    with pytest.raises(AttributeError, match="stop_step is the trainer's"):
        control.stop_step = 9
    assert control.stop_step == 5
    # a dataclass's ways still make and copy it
    replaced = dataclasses.replace(control, should_save=True)
    assert replaced.clock is state and replaced.stop_step == 5
    for copied in (copy.copy(control), pickle.loads(pickle.dumps(control))):
        assert copied.stop_step == 5 and copied.should_stop


class HFStop(Hook):
    """A Hugging Face callback's way of stopping, ported as it was."""

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step >= 2:
            control.should_training_stop = True


@pytest.mark.timeout(120)
def test_a_ported_callbacks_stop_fails_the_run_at_once(tmp_path: Path) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        max_steps=50,
        save_at_end=False,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(0)
    run = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(800, 0)),
        process_sample=xy,
        hooks=[HFStop()],
    )
    with pytest.raises(AttributeError, match="set should_stop"):
        run.train()
    assert run.state.global_step == 2  # not trained on to max_steps


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("asked", {}, r"set should_log, should_validate or should_save"),
        ("deferring", True, r"control\.defer"),
        ("stop_reason", "mine", r"control\.request_stop\(reason\)"),
    ],
)
def test_the_trainers_ranks_agreement_and_stop_words_are_refused_to_a_hook(
    name: str, value: Any, says: str
) -> None:
    """`asked`, `deferring` and `stop_reason` are the trainer's too: a hook's
    ``control.deferring = True`` (or False) was accepted, and on one rank alone it
    changed whether that rank's requests wait for the ranks' agreement: its collectives
    fell out of step with the others'. Refused, naming what to use instead; the
    trainer's own ways (`defer`, `request_stop`, a copy) still set them."""
    control = TrainerControl()
    with pytest.raises(AttributeError, match=rf"{name} is the trainer's, not a flag.*{says}"):
        setattr(control, name, value)
    assert control.asked == {} and not control.deferring and control.stop_reason == ""
    control.defer(True)  # the trainer's way, under several ranks
    control.should_save = True  # a hook's request: kept for the agreement
    assert control.deferring and "should_save" in control.asked and not control.should_save
    control.request_stop("the hook's words")
    assert control.stop_reason == "the hook's words" and control.should_stop
    replaced = dataclasses.replace(control)  # (`__init__` sets every field once)
    assert replaced.stop_reason == "the hook's words" and replaced.deferring
    for copied in (copy.copy(control), copy.deepcopy(control), pickle.loads(pickle.dumps(control))):
        assert copied.deferring and copied.stop_reason == "the hook's words"
        with pytest.raises(AttributeError, match=f"{name} is the trainer's"):
            setattr(copied, name, value)


class AsksInPlace(Hook):
    """A hook that changes the requests kept for the ranks' agreement in place."""

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step >= 2:
            control.asked["should_save"] = "mine"


#: what each change in place of `asked` does (a hook's)
CHANGES: dict[str, Any] = {
    "item": lambda asked: asked.__setitem__("should_save", "mine"),
    "del": lambda asked: asked.__delitem__("should_log"),
    "clear": lambda asked: asked.clear(),
    "pop": lambda asked: asked.pop("should_log"),
    "popitem": lambda asked: asked.popitem(),
    "setdefault": lambda asked: asked.setdefault("should_validate", "mine"),
    "update": lambda asked: asked.update(should_save="mine"),
    "ior": lambda asked: asked.__ior__({"should_save": "mine"}),
}
ASKED_IN_PLACE = (
    r"asked cannot be changed in place: .*set should_log, should_validate or should_save"
)


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_requests_kept_for_the_ranks_agreement_are_not_changed_in_place(change: str) -> None:
    """Failed before: a hook's ``control.asked["should_save"] = ...`` (or any dict
    method that changes it) was accepted, as ``control.asked = {}`` no longer is, and
    changed this rank's requests alone, out of the ranks' agreement (their collectives
    out of step). Refused, naming the flags to set; the trainer's methods still keep,
    take and clear the requests, and a copy is still read-only."""
    control = TrainerControl()
    control.defer(True)
    control.should_log = True  # a hook's request: kept
    with pytest.raises(TypeError, match=ASKED_IN_PLACE):
        CHANGES[change](control.asked)
    assert control.asked == {
        "should_log": "test_the_requests_kept_for_the_ranks_agreement_are_not_changed_in_place"
    }
    control.keep("should_save", "Hook.on_log")  # (the trainer's: a hook's direct call)
    assert control.take_asks() == (1, 0, 1) and control.asked == {}
    control.should_validate = True
    for copied in (copy.copy(control), copy.deepcopy(control), pickle.loads(pickle.dumps(control))):
        assert list(copied.asked) == ["should_validate"]
        with pytest.raises(TypeError, match=ASKED_IN_PLACE):
            CHANGES[change](copied.asked)
    replaced = dataclasses.replace(control)
    assert list(replaced.asked) == ["should_validate"] and replaced.asked is not control.asked
    assert dataclasses.asdict(control)["asked"] == {
        "should_validate": control.asked["should_validate"]
    }
    control.defer(False)  # (the trainer's: cleared)
    assert control.asked == {}


@pytest.mark.timeout(120)
def test_a_hook_changing_the_kept_requests_fails_the_run_at_once(tmp_path: Path) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        max_steps=50,
        save_at_end=False,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(0)
    run = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(800, 0)),
        process_sample=xy,
        hooks=[AsksInPlace()],
    )
    with pytest.raises(TypeError, match=ASKED_IN_PLACE):
        run.train()
    assert run.state.global_step == 2  # not trained on to max_steps
