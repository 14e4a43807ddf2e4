"""Which hook method a rank was in when the process group broke: `HookMark`,
`in_hook_words`.

A collective of the user's own in a hook (``torch.distributed.all_reduce``,
``accelerator.gather``) called on one rank only meets another collective of the
trainer on the other ranks (DDP's backward, the stop agreement). Under gloo one of them
then receives more bytes than it expects and gloo aborts it (SIGABRT, "Received data
size doesn't match expected size": measured with 2 ranks, an ``all_reduce`` of one
float on rank 0 in ``on_step_end``; rank 0 died; with 1000 floats, rank 1 did). An
aborted rank runs no Python and leaves no note (`rank_failure`), so the rank that
survived said only that another rank was gone, "killed by a signal?", and nothing
named the hook.

So under several ranks each rank keeps, in a small file of the notes' folder
(``OUTPUT_DIR/.rank-failures/in-hook-N``) mapped into its memory, the user's hook method
it is in and the step: two writes into memory per call of a user's hook method, no
system call (`enter`, `leave`). The kernel keeps a mapped file's pages when the process
dies, however it dies: a rank whose collective broke because a peer is gone reads the
peer's mark (`in_hook_words`) and names the hook method it died in. On the same node the
mark is read at once; a peer on another node may show it late, through the shared file
system's cache, or not within the wait for notes (then nothing is said of it). The
surviving rank's own collective may have broken in a hook too (the other rank aborted):
its error was raised there (`hooks.raised`), and the same words name that hook.

Each mark holds its rank's pid, the process's start time, host and pid scope (boot id and
pid namespace, `process_alive.pid_scope`) too, written once: of
3 ranks or more the survivor cannot tell from its broken collective which peer is gone
(of 2, a collective broken by a network error does not mean the other died), so it
checks each marked peer's pid (`checked`, one rule for all these words): alive on this
host, the peer "is in" its hook method; ended (or a zombie, or the pid now another
process's), it "died" in it; on another host, the words say it cannot be checked from
here, as for a peer on this host but in another pid namespace (a container of its own:
its pid is not ours to check). A peer in no hook method is checked so too
(`unmarked_words`): its mark, made as the rank started, holds its pid while it is in
none, so a peer killed outside any hook is named as well.

The library's own hooks are not marked: their collectives are called on every rank.
"""

from __future__ import annotations

import mmap
import os
import socket
import struct
from pathlib import Path
from typing import Any, NamedTuple

from melissa_trainer.common.process_alive import pid_scope, runs, start_time
from melissa_trainer.hooks.raised import method_name, raised_in

__all__ = [
    "ALIVE",
    "DEAD",
    "ELSEWHERE",
    "MARK_PREFIX",
    "HookMark",
    "Mark",
    "checked",
    "in_hook_words",
    "known_gone",
    "marked_run",
    "read_mark",
    "read_record",
    "unmarked_words",
    "verdict",
]

#: the marks' file names in the notes' folder (`rank_failure.NOTES_DIR`), then the rank
MARK_PREFIX = "in-hook-"
#: the file: the run's id (`_ID` bytes, NUL-padded), a flag (1: in a hook), the step
#: (int64), the rank's pid and its start time (int64 each: `_started`), its host
#: (`_HOST` bytes, NUL-padded), its pid scope (`_SCOPE` bytes, NUL-padded: a boot id's 36
#: characters and ``pid:[INODE]``), the method's name (NUL-ended)
_ID, _HOST, _SCOPE, _NAME = 64, 64, 96, 256
_FLAG = _ID
_STEP = _ID + 8
_PID = _STEP + 8
_START = _PID + 8
_HOSTNAME = _START + 8
_SCOPED = _HOSTNAME + _HOST
_WORDS = _SCOPED + _SCOPE
_SIZE = _WORDS + _NAME
_STEP_BYTES = struct.Struct("<q")
#: the most ranks alive (or on another host) that `unmarked_words` names one by one
MOST_NAMED = 8
#: what a collective in a hook on some ranks only does, and the fix
HOOK_COLLECTIVE = (
    "a collective in a hook (torch.distributed's, accelerator.gather / reduce) must be "
    "called by every rank at the same step: called on some ranks only, it meets another "
    "collective of the trainer there, and the backend aborts a rank (gloo: SIGABRT, "
    '"Received data size doesn\'t match expected size") or the ranks hang'
)


class Mark(NamedTuple):
    """What a rank's mark says while it is in a user's hook method (`read_mark`)."""

    name: str  # the hook method, ``Class.method``
    step: int
    pid: int  # the rank's process, on `host`
    host: str
    start: int  # its start time (`_started`; 0: not known)
    scope: str = ""  # its pid scope (`process_alive.pid_scope`; "": not known)


def _started(pid: int) -> int:
    """The start time of process `pid` (`process_alive.start_time`), which tells a pid
    reused by another process from its first one; 0 where it is not known."""
    return start_time(pid) or 0


def _lives(mark: Mark) -> bool:
    """Whether `mark`'s process, on this host, still runs: False once it ended, also
    while it is a zombie (its parent has not reaped it yet: the launcher's agent may
    be slow to) and once its pid is another process's (a start time not the mark's);
    True where that cannot be told (`process_alive.runs`)."""
    return runs(mark.pid, mark.start) is not False


def _this_host() -> str:
    """This host's name as a mark reads back: its first ``_HOST - 1`` bytes (a 64-byte
    name, Linux's longest, compared whole read its own rank as another host's, hrev3)."""
    return socket.gethostname().encode()[: _HOST - 1].decode(errors="replace")


#: what `checked` says of a rank's recorded process
DEAD, ALIVE, ELSEWHERE = "dead", "alive", "elsewhere"


def checked(record: Mark, here: str) -> tuple[str, str]:
    """Whether the process that `record` names still runs, the one rule of every word
    on a peer's end (`unmarked_words`, `in_hook_words`): `DEAD` (on this host `here`,
    ended, a zombie, or its pid now another process's: `_lives`), `ALIVE`, or
    `ELSEWHERE` (on another host: not checked from here, whatever a broken collective
    suggests: a network error breaks one with the peer alive; or on this host in
    another pid namespace, where its pid names another process or none, hrev4); with
    the words naming it ("pid P", "pid P on HOST: not this host, not checked from
    here", or "pid P in another pid namespace of this host (a container of its own?):
    not checked from here")."""
    if record.host != here:
        return ELSEWHERE, f"pid {record.pid} on {record.host}: not this host, not checked from here"
    if record.scope and record.scope != pid_scope():
        return ELSEWHERE, (
            f"pid {record.pid} in another pid namespace of this host (a container of "
            "its own?): not checked from here"
        )
    return (ALIVE if _lives(record) else DEAD), f"pid {record.pid}"


def verdict(states: dict[int, str], ranks: list[int]) -> str:
    """What the checks of the peers `ranks` (`states`: each checked rank's `checked`
    state, as the words said it: `unmarked_words`, `in_hook_words`) say together, for
    the opening of the words on a broken collective (`rank_failure.peer_failure`): `DEAD`
    when one is dead on this host, `ALIVE` when every one of them was checked alive on
    this host (the collective broke with no peer gone: a network error, a timeout),
    `ELSEWHERE` otherwise (one on another host, or with no mark: not known)."""
    if DEAD in (states.get(rank) for rank in ranks):
        return DEAD
    if ranks and all(states.get(rank) == ALIVE for rank in ranks):
        return ALIVE
    return ELSEWHERE


class HookMark:
    """This rank's mark: the user's hook method it is in, if any (module docstring).

    `enter` and `leave` are called by `HookList.fire` around each call of a hook method
    (its ``marker``), from the training thread only."""

    def __init__(self, path: Path, run_id: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, _SIZE)
            self._map = mmap.mmap(fd, _SIZE)
        finally:
            os.close(fd)  # (the map keeps the file)
        self._map[:_SIZE] = bytes(_SIZE)
        self._map[:_ID] = run_id.encode()[:_ID].ljust(_ID, b"\0")
        # (who keeps the mark, for a peer to check whether it lives: `_lives`)
        pid = os.getpid()
        _STEP_BYTES.pack_into(self._map, _PID, pid)
        _STEP_BYTES.pack_into(self._map, _START, _started(pid))
        host = socket.gethostname().encode()[: _HOST - 1]  # (`_this_host`'s bytes)
        self._map[_HOSTNAME : _HOSTNAME + len(host)] = host
        scope = (pid_scope() or "").encode()[: _SCOPE - 1]
        self._map[_SCOPED : _SCOPED + len(scope)] = scope
        #: each method's name as the mark holds it; None: a library hook's (not marked)
        self._names: dict[Any, bytes | None] = {}
        self._last: Any = None  # (the method whose name the mark holds)

    def enter(self, method: Any, args: tuple[Any, ...]) -> None:
        """`method` (a hook's bound method, called with `args`: ``trainer, state, ...``)
        is called now: marked, with the state's step, unless it is a library hook's."""
        name = self._names.get(method, b"")
        if name == b"":
            owner = getattr(method, "__self__", None)
            ours = owner is None or type(owner).__module__.startswith("melissa_trainer.")
            name = None if ours else method_name(method).encode()[: _NAME - 1] + b"\0"
            self._names[method] = name
        if name is None:
            self.leave()
            return
        step = getattr(args[1] if len(args) > 1 else None, "global_step", -1)
        mark = self._map
        _STEP_BYTES.pack_into(mark, _STEP, step)
        if method is not self._last:  # (the name written once while it stays the same)
            mark[_WORDS : _WORDS + len(name)] = name
            self._last = method
        mark[_FLAG] = 1

    def leave(self) -> None:
        """No hook method is called now."""
        self._map[_FLAG] = 0

    def back_to(self, method: Any, args: tuple[Any, ...]) -> None:
        """The calls of an event are over: back in `method`, the hook method whose call
        fired it (`args`: that event's), or in none (None)."""
        if method is None:
            self.leave()
        else:
            self.enter(method, args)

    def close(self) -> None:
        self._map.close()


def marked_run(path: Path) -> str | None:
    """The run id that the mark at `path` holds; None when there is no such file (or it
    cannot be read, or is no mark)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_ID)
    except OSError:
        return None
    return data.rstrip(b"\0").decode(errors="replace") if len(data) == _ID else None


def read_record(path: Path, run_id: str) -> Mark | None:
    """What the mark at `path` says of its rank when it is of run `run_id`: its pid,
    start time and host (written once, as the rank started: `HookMark`), and the hook
    method and step it is in (name "" and step -1 when in none); None when there is
    no such mark (or it is unreadable)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) < _SIZE or data[:_ID].rstrip(b"\0") != run_id.encode()[:_ID]:
        return None
    (pid,) = _STEP_BYTES.unpack_from(data, _PID)
    (start,) = _STEP_BYTES.unpack_from(data, _START)
    host = data[_HOSTNAME:_SCOPED].split(b"\0", 1)[0].decode(errors="replace")
    scope = data[_SCOPED:_WORDS].split(b"\0", 1)[0].decode(errors="replace")
    if data[_FLAG] != 1:
        return Mark("", -1, int(pid), host, int(start), scope)
    (step,) = _STEP_BYTES.unpack_from(data, _STEP)
    name = data[_WORDS:_SIZE].split(b"\0", 1)[0].decode(errors="replace")
    return Mark(name, int(step), int(pid), host, int(start), scope)


def read_mark(path: Path, run_id: str) -> Mark | None:
    """The hook method (``Class.method``) and step a mark at `path` says its rank is
    in, with the rank's pid and host, when it is of run `run_id` and in one; None
    otherwise (or unreadable)."""
    record = read_record(path, run_id)
    return record if record is not None and record.name else None


def known_gone(notes: Path, run_id: str, rank: int) -> bool:
    """Whether `rank`'s process is known to have ended: its mark in the folder `notes`
    (of run `run_id`) names a pid on this host, in this pid namespace, that no longer
    runs it (`checked`: `DEAD`). False when it lives, is on another host or in another
    namespace (not checked from here), or has no mark: whatever waits for its word then
    waits as before. Whatever that rank wrote before it ended is visible here now (the
    same kernel: no shared file system's cache between)."""
    record = read_record(notes / f"{MARK_PREFIX}{rank}", run_id)
    return record is not None and checked(record, _this_host())[0] == DEAD


def unmarked_words(
    notes: Path, run_id: str, ranks: list[int], states: dict[int, str] | None = None
) -> str:
    """Whether each of `ranks` that is in no hook method (its mark in the folder
    `notes` says none: a rank in one is named by `in_hook_words`) still runs, by the
    pid its mark holds: "rank N (pid P) is dead on this host" (ended, a zombie, or its
    pid now another process's: `_lives`), "... is alive on this host", or, on another
    host, that it cannot be checked from here; "" when none of them has a mark (one
    that could not be made; a peer's on another node may not show yet). The dead come
    first, each named; of the others, the first `MOST_NAMED`, then their count (a run
    of hundreds of ranks: one line, not hundreds of names).

    For a survivor whose collective broke with no note: of 3 ranks or more the
    collective does not say which peer is gone, and a rank killed outside any hook (a
    signal, the OOM killer) leaves no other word. Each rank's state as said is put in
    `states` when given (`verdict`: the opening says what these words say)."""
    here = _this_host()
    dead: list[str] = []
    others: list[str] = []
    for rank in ranks:
        record = read_record(notes / f"{MARK_PREFIX}{rank}", run_id)
        if record is None or record.name:
            continue
        state, who = checked(record, here)
        if states is not None:
            states[rank] = state
        if state == ELSEWHERE:
            others.append(f"rank {rank} ({who})")
        else:
            (dead if state == DEAD else others).append(
                f"rank {rank} ({who}) is {state} on this host"
            )
    more = len(others) - MOST_NAMED
    said = dead + others[:MOST_NAMED] + ([f"{more} more alive or not checked"] if more > 0 else [])
    return ", ".join(said)


def in_hook_words(
    notes: Path,
    run_id: str,
    ranks: list[int],
    error: BaseException,
    step: int,
    states: dict[int, str] | None = None,
) -> str:
    """Words for a rank, at `step`, whose collective broke because a peer is gone with
    no note: the hook method each of the other `ranks` was in, by its mark in the folder
    `notes`, and the one this rank's own broken collective was called in (`error` raised
    there: `hooks.raised`), then what a collective there needs (`HOOK_COLLECTIVE`); ""
    when none was in a hook.

    Each marked peer's pid says (`checked`, pid and host named), of two ranks too (the
    broken collective suggests the other is gone, but a network error breaks it with
    the peer alive): alive on this host, it "is in" its hook method; ended, it "died"
    there; on another host it "was in" it (a mark outlives its rank: alive there, or
    died there), which cannot be checked from here. The rule is said as the likely
    cause when the ranks were not all in the same hook method at the same step (a
    collective called where some ranks were not); when every rank was in the same one
    at the same step, each called what is there: the death is likely something else
    (killed by a signal, out of memory; with every peer alive on this host, the
    collective broke of something else: a network error, a timeout), the rule only a
    possibility. Each marked
    peer's state as said is put in `states` when given (`verdict`)."""
    places: list[tuple[str, int] | None] = []  # (each rank's hook method and step)
    found: dict[int, str] = {}  # (each marked peer's `checked` state)
    here = _this_host()
    said = []
    own = raised_in(error)
    places.append(None if own is None else (own, step))
    if own is not None:
        said.append(f"this rank's own collective broke in the hook method {own}")
    for rank in ranks:
        mark = read_mark(notes / f"{MARK_PREFIX}{rank}", run_id)
        places.append(None if mark is None else (mark.name, mark.step))
        if mark is None:
            continue  # (in no hook; a peer's on another node may not show yet)
        state, who = checked(mark, here)
        found[rank] = state
        verb = {DEAD: "died", ALIVE: "is", ELSEWHERE: "was"}[state]
        said.append(f"rank {rank} {verb} in the hook method {mark.name} (step {mark.step}, {who})")
    if states is not None:
        states.update(found)
    if not said:
        return ""
    if len(set(places)) > 1:  # (some ranks in a hook where others were not)
        return f"{'; '.join(said)}: {HOOK_COLLECTIVE}"
    name, at = places[0] or ("", step)
    # (the cause guessed is not one the pids contradict: `verdict`, as the opening)
    cause = (
        "every other rank is alive on this host: the collective likely broke of "
        "something else (a network error, a collective's timeout?)"
        if verdict(found, ranks) == ALIVE
        else "the rank gone likely died of something else (killed by a signal, out of memory?)"
    )
    return (
        f"{'; '.join(said)}: every rank was in {name} at step {at}, so each called "
        f"what is there: {cause}; only if some ranks skip a collective there: "
        f"{HOOK_COLLECTIVE}"
    )
