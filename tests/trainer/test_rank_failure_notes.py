"""`trainer.rank_failure` on its own (no training ranks): the note a failing rank writes,
and what another rank whose collective broke makes of it. The two-rank runs are
tests/trainer/test_rank_failure.py."""

from __future__ import annotations

import gc
import logging
import threading
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.hooks import Event, Hook, HookList
from melissa_trainer.trainer import rank_failure
from melissa_trainer.trainer.failing import failed
from melissa_trainer.trainer.rank_failure import (
    RankFailed,
    RankGone,
    lost_a_peer,
    peer_failure,
    write_note,
)

pytestmark = pytest.mark.timeout(120)  # (the gloo groups meet within 30 s or fail)

#: gloo's words on a collective whose peer is gone (torch 2.13)
GLOO_WORDS = (
    "[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1969. This "
    "is typically caused by a remote worker crashing."
)


def gloo_lost_peer() -> RuntimeError:
    """What gloo raises, for real, on a collective whose peer is gone: two gloo process
    groups of one process (a thread each to meet), the second shut down, then an
    all-reduce on the first, waited on as the trainer's `StopSync` does."""
    store = torch.distributed.HashStore()
    groups: list[Any] = [None, None]

    def join(rank: int) -> None:
        groups[rank] = torch.distributed.ProcessGroupGloo(store, rank, 2, timedelta(seconds=20))

    meeting = [threading.Thread(target=join, args=(rank,)) for rank in (0, 1)]
    for thread in meeting:
        thread.start()
    for thread in meeting:
        thread.join(timeout=30)
    mine, gone = groups
    assert mine is not None and gone is not None, "the two gloo groups did not meet"
    groups.clear()
    gone.shutdown()
    del gone  # (its connections close with it)
    gc.collect()
    try:
        mine.allreduce([torch.ones(1)]).wait()
    except RuntimeError as exc:
        return exc
    finally:
        mine.shutdown()  # (else its threads abort the process at exit)
    raise AssertionError("an all-reduce without its peer did not fail")


@pytest.fixture(scope="module")
def gloo() -> RuntimeError:
    return gloo_lost_peer()


def view(out: Path, rank: int, run_id: str = "run-a", world: int = 2) -> Any:
    """The parts of a trainer the notes use (a peer gone with no note: the latest
    checkpoint's folder too)."""
    return SimpleNamespace(
        args=SimpleNamespace(output_dir=str(out)),
        hooks=SimpleNamespace(marker=None),  # (no hook mark: `dir_lost.gone_under` not asked)
        checkpoint_root=str(out / "checkpoints"),
        process_index=rank,
        num_processes=world,
        run_id=run_id,
        state=SimpleNamespace(global_step=7),
    )


def test_a_broken_collective_names_the_rank_that_noted_its_error(
    gloo: RuntimeError,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_note(view(tmp_path, 1), ValueError("its first line\nits second"))
    with caplog.at_level(logging.ERROR, logger="melissa_trainer"):
        failure = peer_failure(view(tmp_path, 0), gloo)
    assert isinstance(failure, RankFailed) and isinstance(failure, RuntimeError)
    assert str(failure) == "rank 1 failed: ValueError: its first line ... (see rank 1's log)"
    assert failure.code == 1  # uncaught: exit status 1, no traceback
    # and what a resume starts from (failed before: the line ended at "with it")
    (latest := tmp_path / "checkpoints" / "checkpoint-5").mkdir(parents=True)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="melissa_trainer"):
        assert isinstance(peer_failure(view(tmp_path, 0), gloo), RankFailed)
    (line,) = caplog.messages
    head = f"{failure}; rank 0 stops at step 7 with it; no checkpoint at this stop ("
    assert line.startswith(head), line
    assert f"resume from {latest} with " in line and "resume_from_checkpoint" in line, line
    # (its own note is not another's: no note, not waited for NOTE_WAIT's 2 s here)
    monkeypatch.setattr(rank_failure, "NOTE_WAIT", 0.0)
    assert isinstance(peer_failure(view(tmp_path, 1), gloo), RankGone)


def test_a_rank_own_error_is_kept(gloo: RuntimeError, tmp_path: Path) -> None:
    write_note(view(tmp_path, 1), ValueError("x"))
    assert peer_failure(view(tmp_path, 0), ValueError("rank 0's own")) is None
    with pytest.raises(RuntimeError) as mismatch:
        torch.ones(2) @ torch.ones(3)  # (torch's own, not a lost peer's words)
    assert not lost_a_peer(mismatch.value)
    assert lost_a_peer(gloo)
    assert not lost_a_peer(RuntimeError(GLOO_WORDS))  # never raised: not a collective's


class UserHook(Hook):
    """A user's hook whose own error has the backend's words."""

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        raise RuntimeError("connection closed by peer")


def test_a_user_error_in_the_backend_words_is_this_rank_own(tmp_path: Path) -> None:
    # Rank 1 failed and left its note; rank 0's hook then raises its own error in the
    # backend's words: rank 0 says its error (and notes it), not rank 1's. Before, the
    # words alone made it "rank 1 failed: ValueError: rank one's".
    write_note(view(tmp_path, 1), ValueError("rank one's"))
    trainer, said = view(tmp_path, 0), []
    trainer.source = SimpleNamespace(note_stop=lambda kind, words: said.append((kind, words)))
    hooks = HookList([UserHook()])
    with pytest.raises(RuntimeError, match="^connection closed by peer\n") as raised:
        try:
            hooks.fire(Event.STEP_END, trainer, trainer.state, TrainerControl())
        except RuntimeError as exc:
            failed(trainer, exc)  # (what train() does with it)
            raise
    assert not isinstance(raised.value, RankFailed)
    assert not lost_a_peer(raised.value)
    # (the hook that raised is named: `melissa_trainer.hooks.raised`)
    error = "UserHook.on_step_end raised RuntimeError: connection closed by peer"
    assert said == [("error", f"training stopped at step 7: {error}")]
    note = (tmp_path / rank_failure.NOTES_DIR / "rank-0").read_text()
    assert note == f"run-a\n{error}\n"


def test_a_peer_gone_without_a_note_is_recorded_preempted(
    gloo: RuntimeError, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rank_failure, "NOTE_WAIT", 0.0)  # (no note comes: not waited for)
    # A rank killed by a signal leaves no note: the others' receivers record the stop as
    # ``preempted`` (their solvers wait for the resumed run and follow it), not ``error``
    # (which ended the solvers at once: user trial 32, tests/trials/test_trial32_rank_killed.py).
    trainer, said = view(tmp_path, 0), []
    trainer.source = SimpleNamespace(note_stop=lambda kind, words: said.append((kind, words)))
    with pytest.raises(RankGone) as raised:  # (quiet: exit code 1, no traceback)
        failed(trainer, gloo)
    assert raised.value.code == 1 and raised.value.__suppress_context__
    assert [kind for kind, _ in said] == ["preempted"], said
    assert "another rank is gone and left no note of why" in said[0][1]


@pytest.mark.skipif(
    not hasattr(torch.distributed, "DistBackendError"), reason="torch without DistBackendError"
)
def test_nccl_words_are_a_lost_peer_in_its_backend_error_only() -> None:
    aborted = "NCCL communicator was aborted on rank 0. Original reason for failure was: ..."
    assert lost_a_peer(torch.distributed.DistBackendError(aborted))  # (its type: torch's)
    assert not lost_a_peer(torch.distributed.DistBackendError("NCCL error: unhandled cuda error"))
    assert not lost_a_peer(RuntimeError(aborted))  # (never raised by the backend)


def test_a_note_of_another_run_is_not_read(
    gloo: RuntimeError,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(rank_failure, "NOTE_WAIT", 0.0)
    write_note(view(tmp_path, 1, run_id="an earlier run"), ValueError("old"))
    with caplog.at_level(logging.ERROR, logger="melissa_trainer"):
        gone = peer_failure(view(tmp_path, 0), gloo)
    assert isinstance(gone, RankGone), gone  # (what train() raises: no note of this run)
    (said,) = caplog.messages
    assert said.startswith("rank 0 stopped at step 7: another rank is gone and left no note")
    assert said == str(gone)


def test_one_process_writes_no_note(gloo: RuntimeError, tmp_path: Path) -> None:
    write_note(view(tmp_path, 0, world=1), ValueError("x"))
    assert not (tmp_path / rank_failure.NOTES_DIR).exists()
    assert peer_failure(view(tmp_path, 0, world=1), gloo) is None


def test_a_note_that_cannot_be_written_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / rank_failure.NOTES_DIR).write_text("a file where the folder goes")
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        write_note(view(tmp_path, 1), ValueError("x"))
    (said,) = caplog.messages
    assert said.startswith("rank 1 could not note its failure in ")


def gloo_timeout() -> RuntimeError:
    """What gloo raises, for real, on a collective whose peer is alive but never joins
    it: two gloo process groups of one process with a 1 s timeout, an all-reduce on the
    first only."""
    store = torch.distributed.HashStore()
    groups: list[Any] = [None, None]

    def join(rank: int) -> None:
        groups[rank] = torch.distributed.ProcessGroupGloo(store, rank, 2, timedelta(seconds=1))

    meeting = [threading.Thread(target=join, args=(rank,)) for rank in (0, 1)]
    for thread in meeting:
        thread.start()
    for thread in meeting:
        thread.join(timeout=30)
    mine, idle = groups
    assert mine is not None and idle is not None, "the two gloo groups did not meet"
    try:
        mine.allreduce([torch.ones(1)]).wait()
    except RuntimeError as exc:
        return exc
    finally:
        mine.shutdown()
        idle.shutdown()
    raise AssertionError("an all-reduce its peer never joined did not time out")


def test_a_backend_timeout_is_not_a_lost_peer_and_propagates(tmp_path: Path) -> None:
    # A peer that is slow or hung is not gone: its error is no `RankGone`, whose words
    # would say it is, and `failed` lets it propagate as it is (train() re-raises it).
    timeout = gloo_timeout()
    assert "timed out" in str(timeout).lower(), timeout
    assert not lost_a_peer(timeout)
    assert peer_failure(view(tmp_path, 0), timeout) is None
    trainer, said = view(tmp_path, 0), []
    trainer.source = SimpleNamespace(note_stop=lambda kind, words: said.append((kind, words)))
    failed(trainer, timeout)  # (returns: the caller raises the error itself)
    assert [kind for kind, _ in said] == ["error"], said
