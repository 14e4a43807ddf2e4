"""Which rank failed, said by every rank: when one rank's `train()` raises (its step, a
hook, its source), the others fail at their next collective with the backend's words
only (gloo: ``RuntimeError: ... Connection closed by peer ... typically caused by a
remote worker crashing``), which name neither the rank nor its error; a user reading
rank 0's log (often the only one read) learned nothing.

The failing rank writes its error's first line in a note, ``OUTPUT_DIR/.rank-failures/
rank-N`` (`write_note`), before it leaves: its process, and with it its side of the
process group's connections, ends after that, so a rank whose collective failed because
of it finds the note there (`peer_failure`) and says, in one line at ERROR, "rank N
failed: <its error> (see rank N's log)", then raises a `RankFailed` in place of the
backend's error: uncaught, it ends the process with exit code 1 and no traceback (the
backend's is of no use; the failing rank's own traceback is in its log).

Every rank reads and writes the run's output directory, as the rendezvous of a study's
simulations (``OUTPUT_DIR/rendezvous``) and the checkpoints do: several nodes share it.
A note holds the run's id (`OnlineTrainer.run_id`): one from an earlier run in the same
directory is never read. A rank killed by a signal (SIGKILL, the OOM killer) writes
none: the others then say, in one paragraph at ERROR, that another rank is gone and
left no note (opened by what the check of the peers' pids says, `opening_words`:
killed, or alive on this host, a network error, or not checked; which one, when there
are two; each peer's pid, and whether it is dead or alive on this host, by the hook
marks: `hook_mark.unmarked_words`, `hook_mark.in_hook_words`), that no checkpoint is
written at this stop, and the latest one to resume from with
``--resume_from_checkpoint latest``; then
they raise a `RankGone`, as quiet as `RankFailed` (before, the backend's error and its
traceback followed the line).

A peer is taken for gone only when a collective said so (`lost_a_peer`): the error was
raised by the backend, not by Python code (a hook's, the loss function's, this
library's), and its words are the backend's for a lost peer. A user's own
``RuntimeError("connection closed by peer")`` is this rank's error, noted as such.
"""

from __future__ import annotations

import dis
import logging
import time
from pathlib import Path

import torch

from melissa_trainer.common.refusal import SaidOnRankZero
from melissa_trainer.core.view import TrainerView
from melissa_trainer.hooks.raised import raised_in
from melissa_trainer.trainer.hook_mark import (
    ALIVE,
    DEAD,
    ELSEWHERE,
    in_hook_words,
    known_gone,
    unmarked_words,
    verdict,
)
from melissa_trainer.trainer.resume_words import failure_words

__all__ = [
    "NOTES_DIR",
    "RankFailed",
    "RankGone",
    "from_the_backend",
    "lost_a_peer",
    "note_of",
    "peer_failure",
    "peer_words",
    "write_note",
]

logger = logging.getLogger(__name__)

#: the notes' folder in the output directory
NOTES_DIR = ".rank-failures"
#: how long a rank whose collective broke waits for the failing rank's note to show
#: (a shared file system's attribute cache may show a new file late; a local one at once),
#: not waited for once every other rank's process is known ended on this host (`_all_ended`)
NOTE_WAIT = 2.0
#: the longest error line a note keeps
MAX_WORDS = 1000
#: words of a collective's error when a peer's process is gone (gloo, torch 2.13, a plain
#: RuntimeError on every collective, DDP's backward included, whether the peer died
#: before the collective began: "[.../gloo/transport/tcp/pair.cc:553] Connection closed
#: by peer [ADDR]:PORT. This is typically caused by a remote worker crashing", or while
#: this rank waited in it: "[...pair.cc:537] Read error [ADDR]:PORT: Connection reset by
#: peer"; measured for all_reduce, broadcast, barrier, all_gather_object,
#: broadcast_object_list and DDP's backward, either rank killed; NCCL, a
#: DistBackendError: its communicator aborted). Not a timeout: a peer that is slow or
#: hung is not gone, and its error propagates as it is)
_PEER_GONE = (
    "closed by peer",
    "reset by peer",
    "remote worker",
    "broken pipe",
    "communicator was aborted",
    "connection refused",
)
#: the instructions of a Python ``raise`` (a bare one, and a ``with``/``finally``'s re-raise)
_RAISES = frozenset(dis.opmap[name] for name in ("RAISE_VARARGS", "RERAISE"))


class RankFailed(RuntimeError, SaidOnRankZero):
    """Raised by `train()` on a rank whose collective broke because another rank
    failed: the message names that rank and its error's first line. Its ERROR line is
    already logged; uncaught, it ends the process with exit code 1 and no traceback;
    ``except RuntimeError`` (and ``except Exception``) catch it."""

    def __init__(self, rank: int, words: str) -> None:
        super().__init__(f"rank {rank} failed: {words} (see rank {rank}'s log)")
        self.rank = rank
        self.words = words
        self.code = 1  # (SystemExit's: the exit status)


class RankGone(RuntimeError, SaidOnRankZero):
    """Raised by `train()` on a rank whose collective broke because another rank's
    process is gone and left no note of why (killed by a signal: ``kill -9``, the OOM
    killer): the message is the ERROR paragraph already logged (`peer_failure`): which
    rank, the checkpoint a resume starts from. Uncaught, it ends the process with exit
    code 1 and no traceback (the backend's says only that a connection closed);
    ``except RuntimeError`` (and ``except Exception``) catch it."""

    def __init__(self, words: str, seen: str = "", opening: str = "", state: str = "") -> None:
        super().__init__(words)
        #: what the checks of the peers' pids say together (`hook_mark.verdict`:
        #: `hook_mark.ALIVE`, every peer alive on this host, the collective broken by
        #: something else; `DEAD`; `ELSEWHERE`), for the stop record's code (`failing.failed`)
        self.state = state or ELSEWHERE
        #: what the peers' marks say ("; by the pids ...; rank N died in the hook
        #: method ..."; "" none), for `peer_words` to say too
        self.seen = seen
        #: what the checks of the peers' pids make of the broken collective (`opening`),
        #: for `peer_words` and the stop record (`failing.failed`) to say as this says it
        self.opening = opening or opening_words(ELSEWHERE, "")
        self.code = 1  # (SystemExit's: the exit status)


#: why no checkpoint is written when a peer is gone
NO_SAVE = "a checkpoint is written by every rank together"


def opening_words(state: str, who: str) -> str:
    """The opening of the words on a collective broken as if a peer were gone, with no
    note of why, by what the peers' pids say (`state`: `hook_mark.verdict`), and `who`
    ("rank N, the only other"; "" of more ranks): one rule for `peer_failure`'s
    paragraph, `peer_words`' line and the stop record. It guesses no cause the check
    contradicts: a peer dead on this host was likely killed (a signal, the OOM killer);
    every peer alive on this host, the collective broke of something else (a network
    error, a timeout), said first; not checked (another host, no mark), either."""
    exited = "the launcher's output names the rank that exited first"
    if state == ALIVE:
        return (
            f"a collective broke as if another rank were gone, but "
            f"{f'{who}, is' if who else 'every other rank is'} alive on this host, and no "
            f"rank left a note of why (a network error, or a collective's timeout on a "
            f"peer? the other ranks' logs say more)"
        )
    cause = (
        "killed by a signal?"
        if state == DEAD
        else "not checked from here: killed by a signal, or a network error?"
    )
    return (
        f"another rank is gone and left no note of why ({who}{': ' if who else ''}{cause} {exited})"
    )


def _all_ended(trainer: TrainerView) -> bool:
    """Whether every other rank's process is known to have ended on this host
    (`hook_mark.known_gone`): a note one wrote before it ended shows here at once, so
    `peer_failure` waits no longer for one (it waited `NOTE_WAIT` s after a ``kill -9``,
    a user's trial, 2026-12-07). A peer on another host may still write one: waited for."""
    notes, run = _notes(trainer), str(trainer.run_id)
    me = trainer.process_index
    return all(known_gone(notes, run, r) for r in range(trainer.num_processes) if r != me)


def _notes(trainer: TrainerView) -> Path:
    return Path(trainer.args.output_dir) / NOTES_DIR


def error_line(error: BaseException) -> str:
    """`error` in one line: its class and its message's first line (" ..." when more),
    after the hook method that raised it when a hook of the user's did (`raised_in`)."""
    words = str(error).strip().splitlines()
    said = f"{type(error).__name__}: {words[0]}" if words else type(error).__name__
    hook = raised_in(error)
    if hook is not None:  # (before the cut: a long message must not hide the hook)
        said = f"{hook} raised {said[: MAX_WORDS - len(hook) - 10]}"
    return (said + (" ..." if len(words) > 1 else ""))[:MAX_WORDS]


def write_note(trainer: TrainerView, error: BaseException) -> None:
    """Under several ranks, write this rank's note: the run's id and `error_line`, for
    the ranks whose collective breaks as this rank leaves (`peer_failure`). Replaces an
    earlier note of this rank. A note that cannot be written is said at WARNING (the
    others then raise their backend's error), never raised: `error` is what propagates."""
    if trainer.num_processes <= 1:
        return
    path = _notes(trainer) / f"rank-{trainer.process_index}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(f"{trainer.run_id}\n{error_line(error)}\n")
        part.replace(path)  # (whole or absent: a reader never sees half a note)
    except OSError as exc:
        me = trainer.process_index
        logger.warning("rank %d could not note its failure in %s: %s", me, path, exc)


def from_the_backend(error: BaseException) -> bool:
    """`error` was raised by a process group's backend: a `torch.distributed.DistError`
    (NCCL's DistBackendError, a DistNetworkError: types only torch raises), or a
    RuntimeError raised inside compiled code (gloo's, from the collective's call, or
    from ``work.wait()``, or from DDP's backward), not by a Python ``raise`` (a hook's,
    a loss function's, this library's): the innermost entry of its traceback is the
    call into the backend, not a ``raise`` instruction. An error never raised (no
    traceback) is not the backend's."""
    dist_error = getattr(torch.distributed, "DistError", None)
    if dist_error is not None and isinstance(error, dist_error):
        return True
    tb = error.__traceback__
    if not isinstance(error, RuntimeError) or tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code.co_code
    return 0 <= tb.tb_lasti < len(code) and code[tb.tb_lasti] not in _RAISES


def lost_a_peer(error: BaseException) -> bool:
    """`error` is a collective's failure because a peer's process is gone, not this
    rank's own: raised by the backend (`from_the_backend`), in the backend's words for a
    lost peer (`_PEER_GONE`). The same words in an error that Python code raised (a
    user's hook) are not the backend's: that error is this rank's own."""
    if not torch.distributed.is_available() or not from_the_backend(error):
        return False
    words = str(error).lower()
    return any(w in words for w in _PEER_GONE)


def _read(trainer: TrainerView, rank: int | None = None) -> tuple[int, str] | None:
    """The earliest note of another rank of this run (of `rank`, when given): (its
    rank, its error line)."""
    found: list[tuple[float, int, str]] = []
    for path in _notes(trainer).glob("rank-*" if rank is None else f"rank-{rank}"):
        named = path.name.removeprefix("rank-")
        if not named.isdigit() or int(named) == trainer.process_index:
            continue
        try:
            run_id, _, words = path.read_text().partition("\n")
            written = path.stat().st_mtime
        except OSError:  # (replaced as it was read: the next look finds it)
            continue
        if run_id == str(trainer.run_id) and words.strip():
            found.append((written, int(named), words.strip()))
    if not found:
        return None
    _, rank, words = min(found)
    return rank, words


def note_of(trainer: TrainerView, rank: int) -> str | None:
    """The error line that `rank`'s note of this run says (waiting up to `NOTE_WAIT` s
    for it to show), or None when it left none: for a rank that knows `rank` failed
    without a collective's breaking (`source_failure`: the ranks agreed on it)."""
    deadline = time.monotonic() + NOTE_WAIT
    while True:
        note = _read(trainer, rank)
        if note is not None or time.monotonic() >= deadline:
            return None if note is None else note[1]
        time.sleep(0.05)  # (a shared file system may show the note late)


def peer_failure(
    trainer: TrainerView, error: BaseException, say: bool = True
) -> RankFailed | RankGone | None:
    """When `error` is a collective's failure because a peer is gone (`lost_a_peer`):
    the `RankFailed` naming the rank whose note says why (waiting up to `NOTE_WAIT` s
    for it), or, when no rank left a note (a rank killed by a signal writes none), a
    `RankGone`; either way its ERROR line logged (unless not `say`: a caller that says
    it in a line of its own, `source_failure.SourceFailure.unagreed`), to be raised in
    place of `error`.
    None for any other error (this rank's own, or a backend's error of other words: a
    timeout), which propagates as it is."""
    if trainer.num_processes <= 1 or not lost_a_peer(error):
        return None
    deadline = time.monotonic() + NOTE_WAIT
    note = _read(trainer)
    while note is None and time.monotonic() < deadline and not _all_ended(trainer):
        time.sleep(0.05)  # (a shared file system may show the note late)
        note = _read(trainer)
    step, me = trainer.state.global_step, trainer.process_index
    if note is None:
        # (of two ranks, the one gone is the other; of more, the launcher's output says)
        who = f"rank {1 - me}, the only other" if trainer.num_processes == 2 else ""
        # (each peer's end, by its mark: the hook method a rank aborted by its backend
        # was in, and whether each peer's pid, recorded as it started, still runs, on
        # this host: `hook_mark.checked`, for two ranks too: a broken collective does
        # not prove the other died; the opening says what those checks say, `verdict`)
        others = [r for r in range(trainer.num_processes) if r != me]
        states: dict[int, str] = {}
        notes, run = _notes(trainer), str(trainer.run_id)
        hook = in_hook_words(notes, run, others, error, step, states)
        pids = unmarked_words(notes, run, others, states)
        seen = f"; by the pids the ranks recorded as they started: {pids}" if pids else ""
        seen += f"; {hook}" if hook else ""
        state = verdict(states, others)
        opening = opening_words(state, who)
        gone = RankGone(
            f"rank {me} stopped at step {step}: {opening}{seen}; "
            f"{failure_words(trainer, None, NO_SAVE, '')}",
            seen,
            opening,
            state,
        )
        if say:
            logger.error("%s", gone)
        return gone
    failure = RankFailed(*note)
    # (what a resume starts from, as a rank gone without a note says: the failing rank
    # left, so no checkpoint is written at this stop either)
    resume = failure_words(trainer, None, NO_SAVE, "")
    if say:
        logger.error("%s; rank %d stops at step %d with it; %s", failure, me, step, resume)
    return failure


def peer_words(other: RankFailed | RankGone) -> str:
    """What happened to the other rank, in words for a line of this rank's own failure
    (`source_failure.SourceFailure.unagreed`): the failed rank and its error, or that
    one is gone with no note, with what the peers' marks say of it (their pids, the
    hook method: `RankGone.seen`), opened as `peer_failure`'s own paragraph opens
    (`RankGone.opening`: `opening_words`)."""
    if isinstance(other, RankFailed):
        return f"meanwhile {other}"
    return f"meanwhile {other.opening}{other.seen}"
