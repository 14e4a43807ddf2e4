"""`HookList`'s rules: unique names, only overriding hooks called, every event a method, each
hook's state taken once, and a method that would fail or never run refused when added
(another library's callback name pointed at our event)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hook_training import train

from melissa_trainer import Event, Hook, HookList, TrainerControl, TrainerState

pytestmark = pytest.mark.timeout(60)


def test_hook_names_must_be_unique() -> None:
    class A(Hook):
        pass

    with pytest.raises(ValueError, match="two hooks are named 'A'"):
        HookList([A(), A()])


def test_only_overriding_hooks_are_called() -> None:
    calls: list[str] = []

    class OnlyStepEnd(Hook):
        def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
            calls.append("step_end")

    hooks = HookList([OnlyStepEnd()])
    assert hooks.listens(Event.STEP_END) and not hooks.listens(Event.STEP_START)
    hooks.fire(Event.STEP_START, None, TrainerState(), TrainerControl())
    hooks.fire(Event.STEP_END, None, TrainerState(), TrainerControl())
    assert calls == ["step_end"]


def test_every_event_has_a_hook_method() -> None:
    for event in Event:
        assert callable(getattr(Hook, event.value))


def test_checkpoint_with_unknown_hook_state_is_refused() -> None:
    with pytest.raises(ValueError, match="does not have"):
        HookList([]).load_state_dict({"Mystery": {"x": 1}})


def test_a_checkpoint_takes_each_hooks_state_once() -> None:
    class Counted(Hook):
        calls = 0

        def state_dict(self) -> dict[str, Any]:
            Counted.calls += 1
            return {"calls": Counted.calls}

    class Stateless(Hook):
        pass

    states = HookList([Counted(), Stateless()]).state_dict()
    assert Counted.calls == 1
    assert states == {"Counted": {"calls": 1}}


def test_a_hook_method_that_would_fail_or_never_run_is_refused_when_added() -> None:
    class WrongSignature(Hook):
        def on_log(self, trainer: Any, state: TrainerState, logs: dict) -> None:  # no control
            pass

    with pytest.raises(TypeError, match=r"WrongSignature.on_log cannot take the arguments"):
        HookList([WrongSignature()])

    class OtherLibrarysName(Hook):
        def on_train_begin(self, trainer: Any, state: TrainerState, control: Any) -> None:
            pass

    with pytest.raises(
        TypeError, match=r"on_train_begin is not a hook event.*did you mean on_train_start\?"
    ):
        HookList([OtherLibrarysName()])

    class Flexible(Hook):  # extra defaults and *args bind: accepted
        def on_log(self, trainer: Any, *rest: Any, extra: int = 0) -> None:
            pass

        def on_save(self, trainer: Any, state: Any, control: Any, path: str, x: int = 1) -> None:
            pass

    assert HookList([Flexible()]).listens(Event.LOG)


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("on_train_begin", "on_train_start"),  # HF TrainerCallback
        ("on_epoch_begin", "on_pseudo_epoch_start"),
        ("on_epoch_end", "on_pseudo_epoch_end"),
        ("on_step_begin", "on_step_start"),
        ("on_evaluate", "on_validation_end"),
        ("on_fit_start", "on_train_start"),  # Lightning's Callback
        ("on_train_batch_end", "on_step_end"),
        ("on_save_checkpoint", "on_save"),
        ("on_logs", "on_log"),  # a typo: the nearest spelling
        ("on_init_end", None),  # none does the same: no hint (difflib: on_train_end)
        ("on_before_backward", None),  # (difflib: on_after_backward)
        ("on_test_start", None),  # (difflib: on_step_start)
        ("on_optimizer_step", None),
    ],
)
def test_another_librarys_callback_name_is_pointed_at_our_event(
    theirs: str, ours: str | None
) -> None:
    """An HF or Lightning user's method name gets the event that does the same here,
    not the nearest spelling (difflib says on_train_end for on_train_begin)."""
    hook = type("Theirs", (Hook,), {theirs: lambda self, trainer, state, control: None})()
    with pytest.raises(TypeError, match=rf"Theirs.{theirs} is not a hook event") as raised:
        HookList([hook])
    hint = re.search(r"did you mean (\w+)\?", str(raised.value))
    assert (hint and hint.group(1)) == (ours or None), raised.value


@pytest.mark.parametrize(
    "theirs", ["on_pre_optimizer_step", "on_optimizer_step", "on_before_optimizer_step"]
)
def test_an_optimizer_step_event_says_where_the_gradients_are(theirs: str) -> None:
    """HF's and Lightning's events around the optimizer step, where a callback reads the
    gradients, have no event here: the refusal says where they are complete
    (htrial11: it listed the events only). Failed before."""
    hook = type("Grads", (Hook,), {theirs: lambda self, trainer, state, control: None})()
    with pytest.raises(TypeError, match=rf"Grads.{theirs} is not a hook event") as raised:
        HookList([hook])
    text = str(raised.value)
    assert "no event does the same here" in text and "did you mean" not in text, text
    assert "on_after_backward when trainer.accelerator.sync_gradients is True" in text, text


def test_a_wrong_hook_fails_before_training_starts(tmp_path: Path) -> None:
    class Typo(Hook):
        def on_logs(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
            pass

    with pytest.raises(TypeError, match="did you mean on_log"):
        train(tmp_path, hooks=[Typo()], max_steps=2)
    assert not (tmp_path / "out" / "checkpoints").exists()  # nothing ran


def test_close_raises_the_first_error_and_logs_every_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[str] = []

    class Failing(Hook):
        def __init__(self, label: str) -> None:
            self.label = label

        @property
        def name(self) -> str:
            return self.label

        def close(self) -> None:
            closed.append(self.label)
            raise RuntimeError(f"{self.label} could not close")

    class Fine(Hook):
        def close(self) -> None:
            closed.append("fine")

    hooks = HookList([Failing("first"), Fine(), Failing("second")])
    with (
        caplog.at_level("ERROR", logger="melissa_trainer"),
        pytest.raises(RuntimeError, match="first could not close"),
    ):
        hooks.close()
    assert closed == ["first", "fine", "second"]
    said = [r for r in caplog.records if "second could not close" in str(r.exc_info)]
    assert said, [r.getMessage() for r in caplog.records]  # (was dropped silently)
