"""A hook ported from Hugging Face with its ``ExportableState`` methods (``state()``, and
``from_state``) keeps no state across a resume here: no checkpoint calls ``state()``,
only `Hook.state_dict`. A user's trial (an HF callback's best loss kept with
``state()``) found its ``hooks.json`` empty, without a word; the hook is now warned of
when added, naming the methods to define (`hooks.method_check._warn_exportable_state`).
This test failed before."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from melissa_trainer.hooks import Hook
from melissa_trainer.hooks.base import HookList

pytestmark = pytest.mark.timeout(30)


class PortedBest(Hook):  # HF: class PortedBest(TrainerCallback, ExportableState)
    def __init__(self) -> None:
        self.best = 1.0

    def state(self) -> dict[str, Any]:
        return {"args": {}, "attributes": {"best": self.best}}


class Kept(PortedBest):  # state() kept as a helper, state_dict defined: no warning
    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best}

    def load_state_dict(self, state: Any) -> None:
        self.best = state["best"]


def test_a_state_method_without_state_dict_is_warned_of_naming_the_fix() -> None:
    with pytest.warns(UserWarning, match="PortedBest defines state()") as said:
        hooks = HookList([PortedBest()])
    text = str(said[0].message)
    assert "would not survive a resume" in text and "state_dict(self)" in text, text
    assert "load_state_dict(self, state)" in text, text
    assert hooks.state_dict() == {}  # (what the warning is about: nothing kept)


def test_a_hook_with_state_dict_is_not_warned_of() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert HookList([Kept()]).state_dict() == {"Kept": {"best": 1.0}}
