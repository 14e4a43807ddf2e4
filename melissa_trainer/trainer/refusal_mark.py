"""Rank 0's mark of a refusal it said, in the launcher's store: how the other ranks
learn, without a collective (a peer may have gone), that rank 0 has said a refusal and
which one (`refusals.refusals_end_the_program`).

Rank 0, once it has printed its line, `leave` s the line in the store of
``accelerate launch`` (torch elastic's agent ``TCPStore``, hosted by the launcher of
node 0: ``TORCHELASTIC_USE_AGENT_STORE``, at ``MASTER_ADDR:MASTER_PORT``), which
outlives the ranks. Another rank `await_mark` s it: a rank holding the quiet copy of
the refusal (`common.refusal.elsewhere`) ends as soon as it is there, without waiting
out its grace for a launcher that may never end it (the launcher of another machine,
``--num_machines 2``, watches its own workers only, and they did not fail); a rank whose
own code raised a refusal compares the mark with its own line and stays silent only when
they are the same (the user's own `ConfigError`, raised alike on every rank). Each
rank that read the mark says so (`await_mark`'s `then`, over the connection it read the
mark on: a new one may take a lost DNS query's 5 s; `read`; a rank held meanwhile in a
collective that rank 0 never joins, from its wait watch's thread: `read_if_left`), and
rank 0 waits for them
(at most `READ_WAIT` s, which covers a reader's first connection losing its lookups)
before it exits: under a single launcher, rank 0's exit makes it end the other ranks,
which could cut short a rank about to say a refusal of its own.

Without an agent store (``python train.py``, another launcher), or when it cannot be
reached (node 0's launcher ended: its rank 0 has ended too), there is no mark:
`await_mark` says so at once (`NO_STORE`, `GONE`); a mark that does not come within its
timeout, None. A store that goes while a rank waits (``--num_machines 2``: rank 0 ended
without its mark, node 0's launcher with it) is `GONE` too, and said by nothing: a plain
connection kept beside the store's client (`StoreLink`) reads its end before the client
is asked again, whose look at a closed connection logs a C++ warning and its stack (about
twenty lines on stderr, from a rank that promised none). Only a store that ends in the
instant between the two still makes torch log it.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from torch.distributed import TCPStore

__all__ = [
    "CONNECT_TIMEOUT",
    "STORE_TIMEOUT",
    "GONE",
    "LOST_LOOKUP",
    "MARK_POLL",
    "NO_STORE",
    "READ_WAIT",
    "StoreLink",
    "await_mark",
    "launch_store",
    "leave",
    "read",
    "read_if_left",
    "read_while_held",
]

#: seconds to reach the launcher's store (it is up before any rank starts: a store
#: that refuses the plain connection, or does not take it within them, is gone)
CONNECT_TIMEOUT = 5.0
#: seconds the store's client waits for the store's answers (its validation of the
#: connection first). Longer than the plain connection's: the store's server looks up
#: each client's address in the DNS (torch's), and a query lost costs the resolver's
#: timeout, 5 s at its default (seen 1 connection in 40 on a machine whose DNS dropped
#: queries), at which the client gave up on a store that was there (taken as gone)
STORE_TIMEOUT = 30.0
#: seconds a reverse lookup lost in the DNS costs (the resolver's default timeout)
LOST_LOOKUP = 5.0
#: at most, seconds rank 0 waits for the other ranks to have read its mark (`leave`): a
#: rank that raised no refusal (one of rank 0's alone) never reads it. A reading rank's
#: first connection (its `await_mark`'s, begun as rank 0 leaves the mark when both
#: refuse at once) may lose two lookups before its read: its client's of the store's
#: address, then the store server's of the client (which blocks every client
#: meanwhile); 5 s beyond them for the read itself
READ_WAIT = 5.0 + 2 * LOST_LOOKUP
#: seconds between two looks for the mark (`await_mark`), or for its readers (`leave`)
MARK_POLL = 0.05
#: `await_mark`'s answer when the store is gone: node 0's launcher ended (after its
#: rank 0), so no mark can come
GONE: Final = "<gone>"
#: `await_mark`'s answer when this process has no store to ask (no torch elastic agent)
NO_STORE: Final = "<no store>"
_PREFIX = "melissa_trainer/refused"
#: set once this process, held in a collective, has read rank 0's mark (`read_if_left`)
_HELD_READ = threading.Event()


def _key() -> str:
    # (a restart of the workers by the same agent, same store, must not read an old mark)
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return f"{_PREFIX}/{run}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


class StoreLink:
    """A client of the launcher's store (`store`, a ``torch.distributed.TCPStore``) and
    the plain TCP connection made to the store first, kept open beside it: it carries
    nothing, and the store's end closes it, which `gone` reads without asking the store
    (the client's request on a closed connection logs a C++ warning with its stack on
    stderr before it raises). A context manager: `close` on exit."""

    def __init__(self, store: TCPStore, probe: socket.socket) -> None:
        self.store = store
        self._probe = probe

    def gone(self) -> bool:
        """Whether the store has closed the plain connection: its process ended (or
        reset it). Never blocks."""
        try:
            # (poll, not select: a descriptor past FD_SETSIZE, in a process with many
            # files open, is out of select's range)
            watch = select.poll()
            watch.register(self._probe, select.POLLIN)
            if not watch.poll(0):
                return False
            # (the store never writes to it: readable is its end, b"" read)
            return self._probe.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # (reset, or closed here: gone either way)
            return True

    def close(self) -> None:
        """Close the plain connection (the store's client closes when dropped)."""
        self._probe.close()

    def __enter__(self) -> StoreLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launch_store(solo: bool = False) -> StoreLink | str | None:
    """A link to the launcher's store (`StoreLink`: its client, a
    ``torch.distributed.TCPStore``); None when this process has none (one process unless
    `solo`, no torch elastic agent store); `GONE` when the store refuses connections or
    does not answer (its launcher has ended). The caller closes the link."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return None
    if (world <= 1 and not solo) or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    try:
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except (KeyError, ValueError):
        return None
    # A plain connection first: a store that is gone refuses it at once, where the
    # store's client would retry (and log each try) for its whole timeout. Kept open:
    # its end says the store went (`StoreLink.gone`)
    try:
        probe = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
    except OSError:
        return GONE
    from torch.distributed import TCPStore

    timeout = datetime.timedelta(seconds=STORE_TIMEOUT)
    try:
        store = TCPStore(host, port, None, False, timeout=timeout, wait_for_workers=False)
    except RuntimeError:  # (torch's DistError: it went between the two connections)
        probe.close()
        return GONE
    return StoreLink(store, probe)


def leave(line: str) -> None:
    """Rank 0, its refusal said as `line`: leave the mark for the other ranks, then wait
    up to `READ_WAIT` s for each to have read it and said its own line if another
    (`read`), so that rank 0's exit, after which a launcher ends the others, does not
    cut one short. Nothing without a store: the others wait out their grace, or their
    launcher ends them."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:  # (no store then: `launch_store`)
        return
    link = launch_store()
    if link is None or isinstance(link, str):
        return
    deadline = time.monotonic() + READ_WAIT
    # (a store gone meanwhile: the others learn it from its absence)
    with link, contextlib.suppress(RuntimeError):
        link.store.set(_key(), line)
        while time.monotonic() < deadline and not link.gone():
            if link.store.add(f"{_key()}/read", 0) >= world - 1:
                break
            threading.Event().wait(MARK_POLL)


def read() -> None:
    """Another rank, done with rank 0's mark (its own line said, if another): tell rank
    0, which waits for it (`leave`). Nothing without a store, or once it is gone."""
    link = launch_store()
    if link is not None and not isinstance(link, str):
        with link, contextlib.suppress(RuntimeError):
            if not link.gone():
                link.store.add(f"{_key()}/read", 1)


def read_if_left(link: StoreLink) -> bool:
    """A rank held in a collective (its wait watch's thread: `roll_call`; a named wait,
    or a step that did not move, DDP's backward): whether rank 0's mark is in the store
    over `link`, this rank's read then told to rank 0 (`leave` waits for it). Held there,
    this rank is about to say no refusal of its own, and rank 0, refusing alone, never
    joins the collective: without the read rank 0 waited out `READ_WAIT` for nothing.
    (A wait or step that ends in the instant between the watch's look and this read,
    rank 0 having joined it just before it refused, counts a rank that goes on: one
    that then says a refusal of its own, another text than rank 0's, could be cut short
    by rank 0's exit; rank 0's line is said. Narrow: left. A compare-and-set, as the
    after-train check-in's, does not close it: what ends the wait is the collective,
    not a store operation, so no key of the store can say whether this rank is still
    held when rank 0 reads the count.) Raises torch's DistError (a RuntimeError) when
    the store fails."""
    if not link.store.check([_key()]):
        return False
    _HELD_READ.set()  # (before the read is told: rank 0 may exit as soon as it is)
    link.store.add(f"{_key()}/read", 1)
    return True


def read_while_held() -> bool:
    """Whether this process read rank 0's mark while held in a collective
    (`read_if_left`): the collective's failure that follows, as rank 0 exits, is rank
    0's refusal, not a fault of this rank (`refusals.refusals_end_the_program`). From
    any thread; never cleared (rank 0's refusal ends the program)."""
    return _HELD_READ.is_set()


def await_mark(timeout: float, then: Callable[[str | None], None] | None = None) -> str | None:
    """Another rank: the line rank 0 said, as soon as its mark is in the store, waiting
    up to `timeout` s for it; `GONE` when the store is, or goes while waiting (rank 0's
    launcher ended, so rank 0 did: said by nothing, `StoreLink.gone`); `NO_STORE` at
    once without one; None without a mark by `timeout` (rank 0 refused nothing: it
    trains, or waits for this rank). Blocks (a launcher's SIGTERM ends it).

    `then`, if given, is called with the answer, and this rank's read is then told (as
    `read` does, unless the store is gone or absent) over the same connection: a new
    one costs torch's client a reverse lookup of the store's address, 5 s where the DNS
    loses the query, as long as rank 0 waits for the reads (`READ_WAIT`)."""
    link = launch_store()
    if link is None or isinstance(link, str):
        answer = NO_STORE if link is None else link
        if then is not None:
            then(answer)
        return answer
    with link:
        found = _poll_mark(link, timeout)
        if then is not None:
            then(found)  # (this rank's own line, if another: said before rank 0 may go)
            if found != GONE:
                with contextlib.suppress(RuntimeError):  # (it went meanwhile: no one waits)
                    if not link.gone():
                        link.store.add(f"{_key()}/read", 1)
        return found


def _poll_mark(link: StoreLink, timeout: float) -> str | None:
    """`await_mark`'s wait on `link`."""
    # Polled, not the store's blocking wait: its timeout (rank 0 refused nothing) logs
    # two lines of C++ warnings on stderr, beside the line this rank then says
    deadline = time.monotonic() + timeout
    try:
        while not link.gone():
            if link.store.check([_key()]):
                return bytes(link.store.get(_key())).decode("utf-8", "replace")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            threading.Event().wait(min(MARK_POLL, left))
    except RuntimeError:  # (torch's DistError: the connection closed, the store went)
        pass
    return GONE
