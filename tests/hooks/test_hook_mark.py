"""`trainer.hook_mark.HookMark`, as `HookList.fire` drives it: while a user's hook
method runs, its mark (a file a peer reads after this rank died) names it and the step;
between calls, after a call that raised, and in a library hook's call it names none;
a mark of another run is never read. The oracle: what each hook saw of its own mark
while it ran (`read_mark` of the file, as a peer reads it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Event, Hook
from melissa_trainer.hooks.base import HookList
from melissa_trainer.hooks.pseudo_epochs import PseudoEpochHook
from melissa_trainer.trainer.hook_mark import HookMark, in_hook_words, read_mark

pytestmark = pytest.mark.timeout(30)


class Reads(Hook):
    """Reads its rank's mark in `on_step_end`, and fires `on_log` from there (a hook's
    call that fires another event: the mark comes back to it after)."""

    def __init__(self, path: Path, run: str) -> None:
        self.path, self.run, self.seen = path, run, []
        self.hooks: HookList | None = None

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.seen.append(read_mark(self.path, self.run))
        assert self.hooks is not None
        self.hooks.fire(Event.LOG, trainer, state, control, {})
        self.seen.append(read_mark(self.path, self.run))

    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        self.seen.append(read_mark(self.path, self.run))


class Raises(Hook):
    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        raise ValueError("boom")


def test_the_mark_names_the_hook_method_running_and_no_other(tmp_path: Path) -> None:
    path = tmp_path / "in-hook-0"
    reads = Reads(path, "run-a")
    hooks = HookList([PseudoEpochHook(1), reads, Raises()])
    reads.hooks = hooks
    hooks.marker = mark = HookMark(path, "run-a")
    state = TrainerState(global_step=7)
    hooks.fire(Event.STEP_END, None, state, TrainerControl())
    assert [None if seen is None else seen[:2] for seen in reads.seen] == [
        ("Reads.on_step_end", 7),
        ("Reads.on_log", 7),
        ("Reads.on_step_end", 7),  # (back in the call that fired LOG)
    ]
    assert read_mark(path, "run-a") is None  # between calls: in no hook
    with pytest.raises(ValueError, match="boom"):
        hooks.fire(Event.STEP_START, None, state, TrainerControl())
    assert read_mark(path, "run-a") is None  # its error is its own, said as such
    # a library hook's call marks nothing (its collectives are every rank's)
    mark.enter(reads.on_step_end, (None, state))
    mark.enter(PseudoEpochHook(1).on_end_of_stream, (None, state))
    assert read_mark(path, "run-a") is None
    # another run's mark is not this run's
    mark.enter(reads.on_step_end, (None, state))
    marked = read_mark(path, "run-a")
    assert marked is not None and marked[:3] == ("Reads.on_step_end", 7, os.getpid())
    assert read_mark(path, "run-b") is None
    words = in_hook_words(tmp_path, "run-a", [0], RuntimeError("closed by peer"), 7)
    said = f"rank 0 is in the hook method Reads.on_step_end (step 7, pid {os.getpid()}): "
    assert words.startswith(said), words
    assert in_hook_words(tmp_path, "run-a", [1], RuntimeError("x"), 7) == ""  # (no mark)
    hooks.close()
    assert hooks.marker is None
