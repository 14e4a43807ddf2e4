"""`trainer.untrained_exit`: an uncaught exception of a rank whose trainer is built and
has not started training writes the rank's note and tells its source, then the previous
`sys.excepthook` prints it as before; a trainer that started training, an error that is
no `Exception`, and one process are left to their own paths. (The two-rank launch this
is for: tests/trainer/test_peer_start_fails.py, ``BEFORE_TRAIN_FROM``.)

The oracles: the note file (`rank_failure.write_note`'s format: the run id, then the
error's line), the calls recorded by a stand-in source and a stand-in previous hook."""

from __future__ import annotations

import sys
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from melissa_trainer.trainer import untrained_exit
from melissa_trainer.trainer.rank_failure import NOTES_DIR

pytestmark = pytest.mark.timeout(30)


class Source:
    def __init__(self) -> None:
        self.told: list[tuple[int, BaseException]] = []

    def note_start_failed(self, rank: int, error: BaseException) -> None:
        self.told.append((rank, error))


class Trainer:
    """What the hook reads of an `OnlineTrainer` (weakly referenced, as one is)."""

    def __init__(self, output_dir: Path, processes: int = 2, started: bool = False) -> None:
        self.args = SimpleNamespace(output_dir=str(output_dir))
        self.num_processes, self.process_index = processes, 1
        self.run_id, self.train_started = "0123456789abcdef", started
        self.source = Source()


@pytest.fixture
def previous(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """This module's hook installed afresh over a recording one; the calls it records."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(sys, "excepthook", lambda *args: calls.append(args))
    monkeypatch.setattr(untrained_exit, "_previous", [])
    monkeypatch.setattr(untrained_exit, "_WATCHED", weakref.WeakSet())
    return calls


def test_an_uncaught_error_before_train_is_noted_then_printed(
    tmp_path: Path, previous: list[tuple[Any, ...]]
) -> None:
    trainer = Trainer(tmp_path)
    untrained_exit.watch_until_trained(trainer)  # type: ignore[arg-type]
    untrained_exit.watch_until_trained(trainer)  # type: ignore[arg-type]  # (installed once)
    assert untrained_exit._previous and len(untrained_exit._previous) == 1
    error = RuntimeError("a hook refused on rank 1")
    sys.excepthook(RuntimeError, error, None)
    note = (tmp_path / NOTES_DIR / "rank-1").read_text().splitlines()
    assert note == [trainer.run_id, "RuntimeError: a hook refused on rank 1"], note
    assert trainer.source.told == [(1, error)]
    assert previous == [(RuntimeError, error, None)]  # (printed as before, once)


@pytest.mark.parametrize("case", ["started", "interrupt", "one process"])
def test_what_is_not_noted_is_still_printed(
    tmp_path: Path, previous: list[tuple[Any, ...]], case: str
) -> None:
    trainer = Trainer(tmp_path, 1 if case == "one process" else 2, case == "started")
    untrained_exit.watch_until_trained(trainer)  # type: ignore[arg-type]
    error: BaseException = KeyboardInterrupt() if case == "interrupt" else ValueError("x")
    assert (sys.excepthook is untrained_exit._uncaught) == (case != "one process")
    sys.excepthook(type(error), error, None)
    assert not (tmp_path / NOTES_DIR).exists()
    assert trainer.source.told == []
    assert previous == [(type(error), error, None)]
