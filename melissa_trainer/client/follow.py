"""How a running simulation follows its trainer across a restart (external mode).

A trainer preempted (SIGTERM: a checkpoint, then exit) or killed, and started again
with ``resume_from_checkpoint``, binds new sockets and rewrites the rendezvous with its
new endpoints and a new run id. A client whose endpoints came from that rendezvous
(``MELISSA_TRAINER_RENDEZVOUS``) and that keeps a replay window
(`ClientTuning.replay_bytes`, `replay.ReplayWindow`) follows it:

1. **Noticing.** At most once every `CHECK_INTERVAL` seconds, a send looks whether the
   rendezvous file of rank 0 was rewritten (one ``stat``; the usual send pays one clock
   read); a send or close that finds a receiver gone (`send_wait.ReceiverGone`, the
   close's timeout) waits up to `ClientTuning.follow_timeout` seconds for a new run to
   publish there. A rewritten rendezvous naming another run id (or other endpoints),
   complete and not marked stopped, is a restarted trainer.
2. **Asking.** It sends each new receiver a HELD_QUERY on the follow socket the
   rendezvous names (``follow_endpoint``) and reads its HELD (`wire.held`): which of
   this simulation's time steps the checkpoint the trainer resumed from holds. A
   malformed reply is counted (`Follower.rejected`) and ignored; no valid one within
   `QUERY_TIMEOUT` seconds is an error.
3. **Sending again.** Every step this client sent that no receiver holds must come
   again: from the window, over new sockets to the new endpoints, after a HELLO with
   the new run id. The BYE to each receiver then counts every step routed to it, held
   or sent again. A needed step that has left the window fails the follow, with the
   advice to run the simulation again with the same simulation id (the resumed trainer
   keeps the steps it holds and takes the others, each once).

Each (simulation, time step) then reaches the training exactly once: the resumed
receivers drop what their checkpoint holds as duplicates. A close follows too: it
returns only once every receiver confirmed that it ingested the BYE (`confirm`), and a
trainer restarted before that is followed. Limits: a trainer restarted after the close
returned, from a checkpoint older than the simulation's last steps, names it
unfinished: run it again; a trainer resumed with no follow socket (an older one)
cannot be followed (today's error).

Not thread-safe: the client's thread.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.sockets import control_dealer
from melissa_trainer.client.tuning import DEFAULT_DISCONNECTED_TIMEOUT
from melissa_trainer.stream.endpoints import fetch_rendezvous, stamp
from melissa_trainer.wire import ProtocolError

if TYPE_CHECKING:  # (the HELD decoding is a rare path: `wire.held` loads when a follow asks)
    from melissa_trainer.wire import HeldReply

__all__ = [
    "CHECK_INTERVAL",
    "QUERY_TIMEOUT",
    "Follower",
    "FollowError",
    "Superseded",
    "Unanswered",
]

#: seconds between two looks at the rendezvous by a send (one `os.stat`)
CHECK_INTERVAL = 1.0
#: seconds a client waits for each receiver's HELD
QUERY_TIMEOUT = 30.0
#: seconds between two looks at the rendezvous while a HELD is awaited (`Superseded`)
SUPERSEDE_INTERVAL = 0.1
_request_ids = itertools.count(1)


class FollowError(DeliveryFailed):
    """The client cannot follow its restarted trainer (the message says why and what to
    do: run the simulation again with the same simulation id). A `TimeoutError`, as a
    send or close that gives up on a trainer gone raises."""


class Unanswered(FollowError):
    """A receiver of the restarted trainer sent no valid HELD within the time asked:
    nothing of the follow was done yet (`Following.switch` asks first)."""


class Superseded(FollowError):
    """The trainer being asked what it holds was replaced in the rendezvous by a newer
    run before it answered (killed as it started, then restarted again): follow that
    one, `entries`, instead. Without this, the client waited `QUERY_TIMEOUT` on the dead
    one and then gave up for good (FollowError), while the newer trainer waited for its
    data (user trial 42: SIGKILL as the resumed trainer's serve file appeared)."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        super().__init__(f"superseded by run {entries[0].get('run_id')}")
        self.entries = entries


class Follower:
    """Notices a restarted trainer in the rendezvous and asks it what it holds (module
    docstring). `Client` does the rest (the new transport and the steps sent again).

    Args:
        rendezvous: the directory the client's endpoints were read from.
        simulation_id: the client's.
        run_id, endpoints: the run and endpoints the client streams to now.
    """

    def __init__(
        self,
        rendezvous: str,
        simulation_id: int,
        run_id: str | None,
        endpoints: Sequence[str],
        disconnected_timeout: float | None = DEFAULT_DISCONNECTED_TIMEOUT,
    ) -> None:
        self.rendezvous = rendezvous
        #: bounds its sockets' TCP connects (`sockets.control_dealer`): the client's tuning's
        self.disconnected_timeout = disconnected_timeout
        self.simulation_id = simulation_id
        self.run_id, self.endpoints = run_id, list(endpoints)
        self._rank0 = Path(rendezvous) / "rank_0.json"
        self._stamp = stamp(self._rank0)
        #: the stamp of rank 0's file at the last look (`rewritten`)
        self._looked = self._stamp
        #: when a send should next look at the rendezvous (`time.monotonic()`)
        self.due_at = time.monotonic() + CHECK_INTERVAL
        #: malformed HELD replies ignored, by reason
        self.rejected: Counter[str] = Counter()
        #: how many times this client followed a restarted trainer
        self.followed = 0

    def due(self) -> bool:
        """Whether a send should look at the rendezvous now (cheap: a clock read)."""
        return time.monotonic() >= self.due_at

    def restarted(self, force: bool = False) -> list[dict[str, Any]] | None:
        """The entries of a new run in the rendezvous if it was rewritten since last
        looked at (or `force`), complete, and names another run or other endpoints;
        else None. Never blocks."""
        self.due_at = time.monotonic() + CHECK_INTERVAL
        now = self._looked = stamp(self._rank0)
        if now == self._stamp and not force:
            return None
        try:
            entries = fetch_rendezvous(self.rendezvous, timeout=0.0)
        except (TimeoutError, OSError):
            return None  # (stopped, or the new trainer is still writing: look again later)
        self._stamp = now
        return entries if self._is_new(entries) else None

    def rewritten(self) -> list[dict[str, Any]] | None:
        """`restarted`, looking at once if rank 0's rendezvous file was rewritten since
        the last look (one ``stat``: its inode and time), else at the send's pace (once
        every `CHECK_INTERVAL` s). Each rewrite is read once: a file marked stopped, or a
        rendezvous not complete yet (the other ranks' files come later), is not read
        again at every call, only at the next rewrite or at the send's pace.

        For `Client.predict` while its requests fail: it notices a restarted trainer as
        soon as that trainer publishes itself, not up to `CHECK_INTERVAL` s later."""
        if stamp(self._rank0) == self._looked and not self.due():
            return None
        return self.restarted()

    def wait_restarted(self, timeout: float | None) -> list[dict[str, Any]] | None:
        """`restarted`, waiting up to `timeout` seconds (None: no bound) for a new run
        to publish; None if none did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.05
        while True:
            entries = self.restarted(force=True)
            if entries is not None:
                return entries
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(
                pause if deadline is None else min(pause, max(deadline - time.monotonic(), 0))
            )
            pause = min(pause * 2, 0.5)

    def _is_new(self, entries: list[dict[str, Any]]) -> bool:
        endpoints = [str(e["endpoint"]) for e in entries]
        run_id = entries[0].get("run_id")
        return endpoints != self.endpoints or run_id != self.run_id

    def forget(self) -> None:
        """Read the rendezvous again at the next look (`restarted`), even unchanged: a
        follow given up before it began (a prediction's, `asking`) is tried again."""
        self._stamp = (-1, -1)

    def adopt(self, entries: list[dict[str, Any]]) -> None:
        """Stream to the run of `entries` from now on."""
        self.endpoints = [str(e["endpoint"]) for e in entries]
        self.run_id = entries[0].get("run_id")
        self._stamp = stamp(self._rank0)
        self.followed += 1

    def held(
        self,
        entries: list[dict[str, Any]],
        timeout: float = QUERY_TIMEOUT,
        until: float | None = None,
    ) -> list[HeldReply]:
        """Each receiver's HELD for this simulation, in rank order (module docstring),
        asked over sockets of a context of its own (ended before it returns); each
        awaited `timeout` s, and never past `until` (a `time.monotonic()` deadline for
        the whole asking, a prediction's: `Following.switch`'s `whole`; None: none).

        Raises:
            Superseded: while a HELD was awaited, the rendezvous named a newer run than
                `entries`'s (looked at every `SUPERSEDE_INTERVAL` s).
            FollowError: a receiver names no follow socket (an older trainer), or sent
                no valid HELD within `timeout` seconds (or by `until`: `Unanswered`).
        """
        replies = []
        context = zmq.Context()
        try:
            for rank, entry in enumerate(entries):
                endpoint = entry.get("follow_endpoint")
                if not endpoint:
                    raise FollowError(
                        f"the restarted trainer's receiver {rank} ({entry['endpoint']}) names "
                        f"no follow socket (a trainer without it cannot be followed)"
                    )
                wait = timeout if until is None else min(timeout, until - time.monotonic())
                replies.append(
                    self._ask(context, str(endpoint), entry, rank, len(entries), max(wait, 0.0))
                )
        finally:
            context.term()
        return replies

    def _newer_than(self, entry: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The entries of a run the rendezvous names now that is not `entry`'s (rank 0's
        file rewritten since the last read: one ``stat`` otherwise), else None."""
        if stamp(self._rank0) == self._stamp:
            return None
        entries = self.restarted()
        if entries is None or entries[0].get("run_id") == entry.get("run_id"):
            return None
        return entries

    def _ask(
        self,
        context: zmq.Context,
        endpoint: str,
        entry: dict[str, Any],
        rank: int,
        world: int,
        timeout: float,
    ) -> HeldReply:
        sock = control_dealer(context, entry, self.disconnected_timeout)
        try:
            sock.connect(endpoint)
            request_id = next(_request_ids)
            sock.send(protocol.encode_held_query(self.simulation_id, request_id))
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                if not sock.poll(int(min(left, SUPERSEDE_INTERVAL) * 1000) + 1):
                    newer = self._newer_than(entry)
                    if newer is not None:
                        raise Superseded(newer)
                    continue
                frames = sock.recv_multipart()
                try:
                    if len(frames) != 1:
                        raise ProtocolError("unexpected_frame", f"{len(frames)} frames, expected 1")
                    reply = protocol.decode_held(frames[0])
                    if (reply.simulation_id, reply.request_id) != (self.simulation_id, request_id):
                        raise ProtocolError("bad_request_id", "a reply to another query")
                    if (reply.rank, reply.world_size) != (rank, world):
                        raise ProtocolError(
                            "bad_rank", f"rank {reply.rank} of {reply.world_size}, asked "
                            f"rank {rank} of {world}"
                        )  # fmt: skip
                except ProtocolError as exc:
                    self.rejected[exc.reason] += 1
                    continue
                return reply
        finally:
            sock.close(linger=0)
        raise Unanswered(
            f"the restarted trainer's receiver {rank} did not say which steps it holds "
            f"within {round(timeout, 3)} s ({endpoint}"
            + (f"; malformed replies ignored: {dict(self.rejected)}" if self.rejected else "")
            + ")"
        )
