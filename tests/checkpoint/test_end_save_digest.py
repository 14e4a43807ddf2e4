"""`trainer.end_save`'s digest at a save (`before_save` + `saved`: the source's record
by the manifest's hash of the ``source.json`` the save wrote, not serialized again) is
the digest of the live state (`fingerprint`, what a load and the end compute) when
nothing changed since, and every change the digest sees makes `checkpoint_current`
false: a sample put, a simulation finished (the source's record), a hook's state. Each
of these fails if the save's digest missed the change (a save's digest taken of the
record after the change, or not of the record at all).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples
from preemption_runs import make_trainer

from melissa_trainer import Hook, OnlineTrainer
from melissa_trainer.buffers import Buffer
from melissa_trainer.checkpoint import manifest
from melissa_trainer.sources.source import Source
from melissa_trainer.trainer import end_save


class Study(Source):
    """Puts 16 samples at start and never ends the stream; its record is a study's
    account of its simulations (`finished`), which changes without a sample."""

    def __init__(self) -> None:
        self.finished: list[int] = []
        self.buffer: Buffer | None = None

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        self.buffer = buffer
        for sample in linear_samples(16):
            buffer.put(sample)

    def wait_for(self, n_samples: int, timeout: float) -> None:
        pass

    def stop(self) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {"finished": list(self.finished)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.finished = list(state["finished"])


class Counts(Hook):
    """A hook whose state changes without a step."""

    def __init__(self) -> None:
        self.seen = 0

    def state_dict(self) -> dict[str, Any]:
        return {"seen": self.seen}

    def load_state_dict(self, state: Any) -> None:
        self.seen = int(state["seen"])


def _trained(tmp_path: Path) -> tuple[OnlineTrainer, Study, Counts]:
    source, hook = Study(), Counts()
    trainer = make_trainer(tmp_path / "out", source, [hook], max_steps=1)
    trainer.train()  # (saves at its end: the checkpoint of step 1)
    return trainer, source, hook


def _saved_equals_plain(trainer: OnlineTrainer) -> bool:
    """A save now; whether its recorded digest is the live state's (`fingerprint`)."""
    assert trainer.save_checkpoint() is not None
    recorded = end_save._RECORDED[trainer]
    return recorded == (trainer.state.global_step, end_save.fingerprint(trainer))


@pytest.mark.timeout(120)
def test_a_save_records_the_digest_of_the_live_state_and_each_change_undoes_it(
    tmp_path: Path,
) -> None:
    trainer, source, hook = _trained(tmp_path)
    buffer = source.buffer
    assert buffer is not None
    assert end_save.saves(trainer) == 1 and end_save.checkpoint_current(trainer)

    changes = {
        "a sample put": lambda: buffer.put(next(linear_samples(1))),
        "a simulation finished": lambda: source.finished.append(len(source.finished)),
        "a hook's state": lambda: setattr(hook, "seen", hook.seen + 1),
    }
    for what, change in changes.items():
        assert _saved_equals_plain(trainer), f"before {what}"
        assert end_save.checkpoint_current(trainer), f"before {what}"
        change()
        assert not end_save.checkpoint_current(trainer), f"{what} left the checkpoint current"
    assert _saved_equals_plain(trainer) and end_save.checkpoint_current(trainer)
    written = json.loads((tmp_path / "out/checkpoints/checkpoint-1/rank_0/source.json").read_text())
    assert written == {"finished": [0]}


@pytest.mark.timeout(120)
def test_the_same_decisions_as_the_plain_digest_on_the_same_history(tmp_path: Path) -> None:
    """A history of changes and saves: after each event, `checkpoint_current` with the
    save's digest says what it says with the plain one recorded instead (the live
    state's `fingerprint` taken before the save wrote, as saves recorded before `saved`)."""
    trainer, source, hook = _trained(tmp_path)
    plain = end_save.fingerprint(trainer)  # (nothing changed since the end's save)

    def current_with(digest: str) -> bool:
        step, ours = end_save._RECORDED[trainer]
        end_save._RECORDED[trainer] = (step, digest)
        try:
            return end_save.checkpoint_current(trainer)
        finally:
            end_save._RECORDED[trainer] = (step, ours)

    history = ["finish", "save", "hook", "finish", "save", "save", "put", "hook", "save"]
    ours, theirs = [], []
    for event in history:
        if event == "save":
            plain = end_save.fingerprint(trainer)
            assert trainer.save_checkpoint() is not None
        elif event == "finish":
            source.finished.append(len(source.finished))
        elif event == "hook":
            hook.seen += 1
        else:
            assert source.buffer is not None
            source.buffer.put(next(linear_samples(1)))
        ours.append(end_save.checkpoint_current(trainer))
        theirs.append(current_with(plain))
    assert ours == theirs == [event == "save" for event in history]


def test_a_save_whose_record_was_not_hashed_is_never_current() -> None:
    """Without the source file's entry the digest equals no state's: a save too many."""
    before = "{}"
    entries: dict[str, manifest.Entry] = {"rank_1/source.json": {"size": 2, "sha256": "x"}}
    assert end_save.saved(before, entries, 0) != end_save.saved(before, entries, 0)
    assert end_save.saved(before, entries, 1) == end_save.saved(before, entries, 1)
