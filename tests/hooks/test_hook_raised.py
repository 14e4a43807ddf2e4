"""An error escaping a user's hook method names the hook (`melissa_trainer.hooks.raised`):
a note under the traceback ("raised by the hook method WeightEMA.on_step_end, at step
30"), and the line the other ranks say (`rank_failure.error_line`). Before, Python's
traceback named the function alone (``on_step_end``, which three hooks may override)
and the other ranks only the error: a user's trial with three hooks, 2 gloo ranks. The
library's own hooks are not marked; nested events keep the innermost hook. The 2-rank
run: tests/trainer/test_rank_failure.py."""

from __future__ import annotations

from typing import Any

import pytest

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Event, Hook
from melissa_trainer.hooks.base import HookList
from melissa_trainer.hooks.progress import ProgressHook
from melissa_trainer.hooks.raised import raised_in
from melissa_trainer.trainer.rank_failure import error_line

pytestmark = pytest.mark.timeout(30)


class Quiet(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        pass


class WeightEMA(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        raise RuntimeError("boom")


def fire_step_end(*hooks: Hook, step: int = 30) -> RuntimeError:
    state = TrainerState(global_step=step)
    with pytest.raises(RuntimeError) as caught:
        HookList(list(hooks)).fire(Event.STEP_END, None, state, TrainerControl())
    return caught.value


def test_the_error_names_the_hook_method_and_the_step() -> None:
    error = fire_step_end(Quiet(), WeightEMA())
    assert str(error) == "boom"  # the message is the user's, unchanged
    assert raised_in(error) == "WeightEMA.on_step_end"
    assert error.__notes__ == ["(raised by the hook method WeightEMA.on_step_end, at step 30)"]
    assert error_line(error) == "WeightEMA.on_step_end raised RuntimeError: boom"


def test_an_error_of_no_hook_is_said_as_before() -> None:
    assert error_line(ValueError("bad\nmore")) == "ValueError: bad ..."


def test_a_library_hooks_error_is_not_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(self: Any, trainer: Any, state: Any, control: Any) -> None:
        raise RuntimeError("the library's own words")

    monkeypatch.setattr(ProgressHook, "on_step_end", fails)
    error = fire_step_end(ProgressHook(disable_bar=True))
    assert raised_in(error) is None and not getattr(error, "__notes__", [])


def test_a_nested_event_keeps_the_innermost_hook() -> None:
    inner = HookList([WeightEMA()])

    class Outer(Hook):  # its call fires another event (as trainer.log() fires on_log)
        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            inner.fire(Event.STEP_END, trainer, state, control)

    error = fire_step_end(Outer())
    assert raised_in(error) == "WeightEMA.on_step_end"
    assert len(error.__notes__) == 1
