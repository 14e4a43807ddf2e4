"""A peer's end, said by the survivor of a broken collective, by the one rule of the
recorded pids (`trainer.hook_mark.checked`): of two ranks too, and in the line of a
rank whose own lr_scheduler (or source) failed as its peer went (`rank_failure.peer_words`).

Failed before: (1) of two ranks, the other, known gone from the broken collective,
"died in the hook method ..." whatever its pid said: a peer alive (the collective broken
by a network error, not by its death) was said dead; (2) `SourceFailure.unagreed`'s
line said "meanwhile another rank is gone and left no note of why (...)" with no pid,
where `peer_failure`'s own paragraph named it ("rank 1 (pid P) is dead on this host").
The peer is a real process (rank 1, its mark made as `starting.mark_hooks` makes it, in
``Gathers.on_step_end`` at step 5 when asked), alive, then SIGKILLed and reaped. The
oracle: the words as written here, with the pid the process was given."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from melissa_trainer.core.schedule_length import SchedulerStepError
from melissa_trainer.hooks import Hook
from melissa_trainer.trainer import failing, rank_failure
from melissa_trainer.trainer.rank_failure import NOTES_DIR, RankGone, peer_failure
from melissa_trainer.trainer.source_failure import SourceFailure

pytestmark = [
    pytest.mark.e2e,  # (a process of its own)
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="/proc for a process's state"),
]

RUN = "run-c"
ROOT = Path(__file__).resolve().parents[2]
#: rank 1: its mark made, in ``Gathers.on_step_end`` at step 5 when argv[3] is "hook",
#: until its stdin closes
RANK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from melissa_trainer.core.state import TrainerState
    from melissa_trainer.hooks import Hook
    from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark

    class Gathers(Hook):
        def on_step_end(self, trainer, state, control):
            pass

    mark = HookMark(Path(sys.argv[1]) / f"{MARK_PREFIX}1", sys.argv[2])
    if sys.argv[3] == "hook":
        mark.enter(Gathers().on_step_end, (None, TrainerState(global_step=5)))
    print("marked", flush=True)
    sys.stdin.read()
    """
)


class Gathers(Hook):
    def on_step_end(self, trainer: object, state: object, control: object) -> None:
        """(this rank's own collective broke here)"""


def _rank(notes: Path, where: str) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", RANK, str(notes), RUN, where]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "marked\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def in_hook(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    yield from _rank(tmp_path / NOTES_DIR, "hook")


@pytest.fixture
def in_none(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    yield from _rank(tmp_path / NOTES_DIR, "none")


def _trainer(out: Path) -> Any:
    """Rank 0 of 2, of what `SourceFailure.unagreed` reads."""
    watch = SimpleNamespace(pause=contextlib.nullcontext)
    return SimpleNamespace(
        num_processes=2, process_index=0, run_id=RUN, is_main_process=True,
        args=SimpleNamespace(output_dir=str(out)), checkpoint_root=out / "checkpoints",
        state=SimpleNamespace(global_step=7, last_save_step=0),
        stop_sync=SimpleNamespace(distributed=True, watch=watch),
        source=SimpleNamespace(note_stop=lambda *a: None),
    )  # fmt: skip


def test_of_two_ranks_a_live_peer_is_not_said_dead(
    tmp_path: Path, in_hook: subprocess.Popen[str]
) -> None:
    pid = in_hook.pid
    # a collective broken in gloo's words for a lost peer, the peer alive (a network error)
    broke = torch.distributed.DistError("Connection closed by peer [127.0.0.1]:1969")
    gone = peer_failure(_trainer(tmp_path), broke, say=False)
    assert isinstance(gone, RankGone), gone
    assert f"rank 1 is in the hook method Gathers.on_step_end (step 5, pid {pid})" in str(gone)
    assert "rank 1 died" not in str(gone), gone  # (before: "rank 1 died in ...")
    in_hook.send_signal(signal.SIGKILL)
    in_hook.wait()
    gone = peer_failure(_trainer(tmp_path), broke, say=False)
    assert f"rank 1 died in the hook method Gathers.on_step_end (step 5, pid {pid})" in str(gone)


@pytest.mark.parametrize("where", ["in_none", "in_hook"])
def test_a_failed_source_line_names_the_gone_peer_by_its_pid(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    peer: subprocess.Popen[str] = request.getfixturevalue(where)
    peer.send_signal(signal.SIGKILL)  # (no note: killed)
    peer.wait()
    failure = SourceFailure(_trainer(tmp_path))
    failed = SchedulerStepError(torch.optim.lr_scheduler.LambdaLR)
    failed.__cause__ = IndexError("list index out of range")
    failure.hold_schedule(failed)  # (its line: `peer_words` in a note of it)
    broke = torch.distributed.DistError("Connection closed by peer [127.0.0.1]:1969")
    ended = failure.unagreed(broke)
    assert ended is not None
    said = str(ended) + " ".join(getattr(ended, "__notes__", []))
    assert "meanwhile another rank is gone and left no note of why" in said, said
    if where == "in_none":
        seen = f"by the pids the ranks recorded as they started: rank 1 (pid {peer.pid}) is dead"
    else:
        seen = f"rank 1 died in the hook method Gathers.on_step_end (step 5, pid {peer.pid})"
    assert seen in said, said  # (before: no pid, no hook)


KILLED = "another rank is gone and left no note of why (rank 1, the only other: killed by a signal?"
ALIVE = (
    "a collective broke as if another rank were gone, but rank 1, the only other, is alive "
    "on this host, and no rank left a note of why (a network error, or a collective's timeout"
)
UNCHECKED = (
    "another rank is gone and left no note of why (rank 1, the only other: not checked from "
    "here: killed by a signal, or a network error?"
)


@pytest.mark.parametrize("where", ["in_none", "in_hook"])
def test_the_opening_guesses_no_cause_the_pid_contradicts(
    tmp_path: Path, where: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before: a live peer's paragraph opened "another rank is gone ... (rank 1,
    the only other: killed by a signal?", then said the peer alive; so did the line of a
    rank whose own source failed (`peer_words`) and the stop record (`RankGone.opening`)."""
    peer: subprocess.Popen[str] = request.getfixturevalue(where)
    monkeypatch.setattr(rank_failure, "NOTE_WAIT", 0.0)  # (no note comes: not waited for)
    broke = torch.distributed.DistError("Connection closed by peer [127.0.0.1]:1969")

    def said() -> tuple[str, str]:
        gone = peer_failure(_trainer(tmp_path), broke, say=False)
        assert isinstance(gone, RankGone), gone
        failure = SourceFailure(_trainer(tmp_path))
        failed = SchedulerStepError(torch.optim.lr_scheduler.LambdaLR)
        failed.__cause__ = IndexError("list index out of range")
        failure.hold_schedule(failed)
        ended = failure.unagreed(broke)
        assert ended is not None
        return str(gone), " ".join(getattr(ended, "__notes__", []))

    # alive on this host (a network error broke the collective): said first, no kill guessed
    gone, line = said()
    assert gone.startswith(f"rank 0 stopped at step 7: {ALIVE}"), gone
    assert line.startswith(f"meanwhile {ALIVE}"), line
    assert "killed" not in gone + line, (gone, line)
    assert f"pid {peer.pid}" in gone and f"pid {peer.pid}" in line, (gone, line)
    # on another host, as this one reads it: neither alive nor dead is said
    with monkeypatch.context() as there:
        there.setattr(socket, "gethostname", lambda: "another-node")
        gone, line = said()
    assert gone.startswith(f"rank 0 stopped at step 7: {UNCHECKED}"), gone
    assert line.startswith(f"meanwhile {UNCHECKED}"), line
    # dead on this host: killed, likely
    peer.send_signal(signal.SIGKILL)
    peer.wait()
    gone, line = said()
    assert gone.startswith(f"rank 0 stopped at step 7: {KILLED}"), gone
    assert line.startswith(f"meanwhile {KILLED}"), line


def test_the_stop_record_says_broken_not_preempted_when_the_peer_is_alive(
    tmp_path: Path, in_none: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop record (`failing.failed`, docs/protocol.md "The stop record") of a rank
    whose collective broke with its peer alive on this host (a network error, a
    collective's timeout: no signal) says ``broken``, which solvers follow as
    ``preempted`` (a resume may come) in words that do not say "preempted"; the peer
    killed, ``preempted`` still. Failed before (hstop): ``preempted`` both times."""
    monkeypatch.setattr(rank_failure, "NOTE_WAIT", 0.0)  # (no note comes: not waited for)
    broke = torch.distributed.DistError("Connection closed by peer [127.0.0.1]:1969")
    noted: list[tuple[str, str]] = []

    def code() -> str:
        trainer = _trainer(tmp_path)
        trainer.source = SimpleNamespace(note_stop=lambda *said: noted.append(said))
        trainer.hooks = SimpleNamespace(marker=None)
        with pytest.raises(RankGone):
            failing.failed(trainer, broke)
        return noted[-1][0]

    assert code() == "broken", noted[-1]
    assert "rank 1, the only other, is alive on this host" in noted[-1][1], noted[-1]
    in_none.send_signal(signal.SIGKILL)
    in_none.wait()
    assert code() == "preempted", noted[-1]


class Clock:
    """A stand-in for `rank_failure`'s clock: each sleep counted, and added to the time."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds


@pytest.mark.parametrize("peer", ["killed", "alive", "elsewhere"])
def test_no_note_is_waited_for_once_the_peer_is_known_dead_on_this_host(
    tmp_path: Path, in_none: subprocess.Popen[str], peer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank whose collective broke waits `NOTE_WAIT` s for a note only while a peer
    may still write one: alive, or on another host (not checked from here); once every
    peer's process is known dead on this host, whatever it wrote shows at once, and
    the paragraph follows with no wait (a user's trial: 2 s of the 18 after a
    ``kill -9``). Failed before (hdead): the killed peer's note was waited for too, 40
    sleeps of 0.05 s. The oracle: the sleeps counted by a stand-in clock."""
    clock = Clock()
    monkeypatch.setattr(rank_failure, "time", clock)
    if peer == "killed":
        in_none.send_signal(signal.SIGKILL)
        in_none.wait()
    elif peer == "elsewhere":
        monkeypatch.setattr(socket, "gethostname", lambda: "another-node")
    broke = torch.distributed.DistError("Connection closed by peer [127.0.0.1]:1969")
    gone = peer_failure(_trainer(tmp_path), broke, say=False)
    assert isinstance(gone, RankGone), gone
    waited = round(rank_failure.NOTE_WAIT / 0.05)
    assert clock.sleeps == (0 if peer == "killed" else waited), (peer, clock.sleeps)
    if peer == "killed":  # (the words as before: the pid's check says it)
        assert f"rank 1 (pid {in_none.pid}) is dead on this host" in str(gone), gone
