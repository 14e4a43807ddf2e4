"""`trainer.rank_failure` on its own (no process group): the note a failing rank writes,
and what another rank whose collective broke makes of it. The two-rank runs are
tests/trainer/test_rank_failure.py."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from melissa_trainer.trainer import rank_failure
from melissa_trainer.trainer.rank_failure import RankFailed, lost_a_peer, peer_failure, write_note

GLOO = RuntimeError(
    "[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1969. This "
    "is typically caused by a remote worker crashing."
)


def view(out: Path, rank: int, run_id: str = "run-a", world: int = 2) -> Any:
    """The parts of a trainer the notes use."""
    return SimpleNamespace(
        args=SimpleNamespace(output_dir=str(out)),
        process_index=rank,
        num_processes=world,
        run_id=run_id,
        state=SimpleNamespace(global_step=7),
    )


def test_a_broken_collective_names_the_rank_that_noted_its_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_note(view(tmp_path, 1), ValueError("its first line\nits second"))
    with caplog.at_level(logging.ERROR, logger="melissa_trainer"):
        failure = peer_failure(view(tmp_path, 0), GLOO)
    assert isinstance(failure, RankFailed) and isinstance(failure, RuntimeError)
    assert str(failure) == "rank 1 failed: ValueError: its first line ... (see rank 1's log)"
    assert failure.code == 1  # uncaught: exit status 1, no traceback
    assert caplog.messages == [f"{failure}; rank 0 stops at step 7 with it"]
    assert peer_failure(view(tmp_path, 1), GLOO) is None  # (its own note is not another's)


def test_a_rank_own_error_is_kept(tmp_path: Path) -> None:
    write_note(view(tmp_path, 1), ValueError("x"))
    assert peer_failure(view(tmp_path, 0), ValueError("rank 0's own")) is None
    assert not lost_a_peer(RuntimeError("CUDA out of memory"))
    assert lost_a_peer(GLOO)


def test_a_note_of_another_run_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(rank_failure, "NOTE_WAIT", 0.0)
    write_note(view(tmp_path, 1, run_id="an earlier run"), ValueError("old"))
    with caplog.at_level(logging.ERROR, logger="melissa_trainer"):
        assert peer_failure(view(tmp_path, 0), GLOO) is None
    (said,) = caplog.messages
    assert said.startswith("rank 0 stopped at step 7: another rank is gone and left no note")


def test_one_process_writes_no_note(tmp_path: Path) -> None:
    write_note(view(tmp_path, 0, world=1), ValueError("x"))
    assert not (tmp_path / rank_failure.NOTES_DIR).exists()
    assert peer_failure(view(tmp_path, 0, world=1), GLOO) is None


def test_a_note_that_cannot_be_written_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / rank_failure.NOTES_DIR).write_text("a file where the folder goes")
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        write_note(view(tmp_path, 1), ValueError("x"))
    (said,) = caplog.messages
    assert said.startswith("rank 1 could not note its failure in ")
