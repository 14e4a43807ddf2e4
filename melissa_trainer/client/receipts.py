"""`Rounds`: a closing client's RECEIPT_QUERYs to its receivers' follow sockets, and
their answers (docs/protocol.md, section 17b; what they are for and when: `confirm`).

One DEALER per receiver, connected once for all the rounds to one run; a query per
receiver at a time (its answer may come late: held by the receiver until the BYE is in,
at most its `RECEIPT_HOLD`). A malformed or foreign reply is counted in the client's
``admission_rejected`` by reason, and ignored. What a wait that ends without every
receipt says (refused, gone, no progress) is `receipt_words`'s. Not thread-safe: the closing thread.
Sockets of a context of their own, ended before each call returns."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from melissa_trainer.client import delivery
from melissa_trainer.client.closing import client_logger
from melissa_trainer.client.delivery import capped_deadline
from melissa_trainer.client.gave_up import DeliveryFailed, waits_for
from melissa_trainer.client.peer_watch import notice_after
from melissa_trainer.client.receipt_words import Closed, gone_words, refused, unconfirmed
from melissa_trainer.client.sockets import control_dealer
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.wire import ProtocolError
from melissa_trainer.wire.receipt import (
    ReceiptReply,
    confirms,
    decode_receipt,
    encode_receipt_query,
)

__all__ = ["PAUSE", "ROUND_TIMEOUT", "Rounds", "confirmed"]

#: seconds one round waits for the receivers' RECEIPTs: a live receiver answers at once
#: if it can confirm the BYE, else within its hold (`follow_server.RECEIPT_HOLD`, 0.5 s)
ROUND_TIMEOUT = 2.0
#: seconds between two rounds that confirmed nothing
PAUSE = 0.01
_request_ids = itertools.count(1)
#: what a follow socket's monitor reports: a TCP connection made or lost
_LINK_EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED


def _linked(monitor: zmq.Socket, linked: bool) -> tuple[bool, bool]:
    """Whether the monitored DEALER has a TCP connection now (`linked`: before), from
    the events its monitor queued since, and whether one was made among them."""
    made = False
    while monitor.poll(0):
        event = recv_monitor_message(monitor)["event"]
        linked = event == zmq.EVENT_CONNECTED
        made = made or linked
    return linked, made


def confirmed(reply: ReceiptReply, count: int) -> bool:
    """Whether `reply` confirms a BYE that carried `count`: the simulation finished
    there, or this rank's BYE is in with that count (one of an earlier attempt with
    another count is not this one's)."""
    return confirms(reply.admission, reply.bye, reply.bye_steps, count) is True


class Rounds:
    """The RECEIPT_QUERY rounds to the receivers of `entries` (one DEALER each)."""

    def __init__(self, client: Closed, entries: list[dict[str, Any]], whose: str) -> None:
        self.client, self.entries, self.whose = client, entries, whose
        self.world = len(entries)

    def once(self) -> list[ReceiptReply] | None:
        """One round: every receiver's receipt, or None if one did not answer."""
        context = zmq.Context()
        try:
            socks = self._connect(context)
            answers = self._round(socks, [None] * self.world, time.monotonic() + ROUND_TIMEOUT)
        finally:
            context.destroy(linger=0)
        return None if any(a is None for a in answers) else answers  # type: ignore[return-value]

    def wait(
        self,
        deadline: float | None,
        rendezvous: str,
        restarted: Callable[[], bool],
        follow_wait: float | None = None,
        cap: float | None = None,
    ) -> list[ReceiptReply] | str:
        """Ask in rounds until every receiver confirms (their receipts), one is gone
        (why, to raise or to follow), or `restarted` says that a restarted trainer
        published ("": `confirm_close` reads the rendezvous again).

        `follow_wait`: the seconds the caller will wait for a restarted trainer after
        one is gone (its `follow_timeout`; None: it will not), for the message.

        Gone: silent, with no TCP connection to its follow socket, for
        ``disconnected_timeout`` seconds (the trainer died); after `notice_after` of
        them, one warning says what the close waits for and how long (`_tell`). A
        receiver whose process is there but does not answer (SIGSTOP, a suspended job:
        the kernel keeps its connections) is waited for, as the transport waits for a
        paused trainer (`patience`), until `deadline`.

        Progress moves `deadline`: a receiver whose answer holds more of the
        simulation's steps than it said before (it ingests them, at its
        sample-to-insert pace: a resumed trainer taking a replay), or one that confirms,
        puts it ``close_timeout`` seconds from then. So ``close_timeout`` bounds a wait
        *without progress*, not the whole wait (`unconfirmed`: the message). Neither
        passes `cap` (None: none; `confirm_close`: the close's start plus CLOSE_CAP_FACTOR
        close timeouts), so a trickle of progress does not hold the exit for ever.

        Raises:
            SimulationRefused: a receiver refused the simulation.
            TimeoutError: `deadline` passed, receivers alive and the BYE not in.
        """
        client = self.client
        gone_after = client.tuning.disconnected_timeout
        began, told, capped = time.monotonic(), False, False
        if deadline is not None:  # (the rule of both phases: `delivery.capped_deadline`)
            deadline, capped = capped_deadline(-math.inf, deadline, cap)
        context = zmq.Context()
        try:
            socks = self._connect(context, monitored=True)
            monitors = [sock.get_monitor_socket(_LINK_EVENTS) for sock, _ in socks]
            linked = [False] * self.world
            ever = [False] * self.world  # (none: a wrong follow endpoint, said by `_gone`)
            heard = [time.monotonic()] * self.world
            done: list[ReceiptReply | None] = [None] * self.world
            held = [-1] * self.world  # (the most steps each said it holds; -1: no answer)
            records = StopRecords(
                rendezvous, [str(e.get("endpoint")) for e in self.entries], client.run_id,
                client.simulation_id, client.rank, self.whose,
            )  # fmt: skip
            while True:
                for rank in range(self.world):  # (one that stopped: its stop record)
                    if done[rank] is None:
                        spans = client.bye_spans[rank]  # (with the counts: `StopRecords._taken`)
                        done[rank] = records.decide(rank, client.bye_counts[rank], spans)
                if all(d is not None for d in done):
                    return done  # type: ignore[return-value]
                answers = self._round(socks, done, time.monotonic() + ROUND_TIMEOUT)
                now = time.monotonic()
                for rank, monitor in enumerate(monitors):
                    linked[rank], made = _linked(monitor, linked[rank])
                    ever[rank] = ever[rank] or made
                    if linked[rank]:
                        heard[rank] = now  # (its process is there: paused, not gone)
                progressed = False
                for rank, reply in enumerate(answers):
                    if reply is None:
                        continue
                    heard[rank] = now
                    refused(self.client, self.entries, reply, rank)
                    progressed = progressed or 0 <= held[rank] < reply.steps
                    held[rank] = max(held[rank], reply.steps)
                    if confirmed(reply, client.bye_counts[rank]):
                        done[rank], progressed = reply, True
                if all(d is not None for d in done):
                    return done  # type: ignore[return-value]
                if progressed and deadline is not None and client.tuning.close_timeout is not None:
                    until = now + client.tuning.close_timeout
                    deadline, capped = capped_deadline(deadline, until, cap)
                if restarted():
                    return ""  # (followed by the caller: the rendezvous read again)
                bound = math.inf if gone_after is None else gone_after
                silent = [r for r in range(self.world) if not done[r] and now - heard[r] > bound]
                quiet = [
                    r for r in range(self.world)
                    if not done[r] and now - heard[r] >= notice_after(gone_after)
                ]  # fmt: skip
                if quiet and not told:  # (once, before it gives up: `silent` is quieter)
                    told = True
                    said = (deadline, capped, rendezvous, follow_wait, began)
                    self._tell(quiet[0], heard[quiet[0]], *said)
                if silent:
                    r, whose = silent[0], (self.client, self.entries, self.whose)
                    return gone_words(*whose, r, gone_after, rendezvous, follow_wait, not ever[r])
                if deadline is not None and now >= deadline:
                    raise DeliveryFailed(self.unconfirmed(done, held, capped))
                time.sleep(PAUSE)
        finally:
            context.destroy(linger=0)

    def unconfirmed(
        self, done: Sequence[ReceiptReply | None], held: Sequence[int], capped: bool = False
    ) -> str:
        """Why the close gives up, no receiver `done` having progressed
        (`receipt_words.unconfirmed`)."""
        return unconfirmed(self.client, self.whose, done, held, capped)

    def _tell(
        self, rank: int, since: float, deadline: float | None, capped: bool, rendezvous: str,
        follow_wait: float | None, began: float,
    ) -> None:  # fmt: skip
        """Log, once per wait, that receiver `rank` has neither answered nor been
        connected since `since` (`time.monotonic()`), and what the close waits for (as
        the transport's close says it, `closing.waiting_notice`): until `deadline`, the
        close's cap in all when `capped` (it held the deadline back: `cap_bound`)."""
        now, tuning = time.monotonic(), self.client.tuning
        left: float | None = None
        bound = ""
        if tuning.disconnected_timeout is not None:
            left = tuning.disconnected_timeout - (now - since)
            bound = f"ClientTuning.disconnected_timeout={tuning.disconnected_timeout} s"
        if deadline is not None and (left is None or deadline - now < left):
            setter, timeout = "ClientTuning.close_timeout", tuning.close_timeout
            left = deadline - now
            bound = delivery.cap_bound(setter, timeout) if capped else f"{setter}={timeout} s"
        clock = time.strftime("%H:%M:%S", time.localtime(time.time() - (now - since)))
        text = (
            f"{self.whose}: closing, its BYE is not confirmed yet: the trainer's receiver "
            f"{rank} ({self.entries[rank].get('follow_endpoint')}) has neither answered nor "
            f"been connected since {clock} ({now - since:.0f} s: the trainer died or stopped, "
            f"or its node). "
        )
        left = None if left is None else max(left, 0.0)
        follows = follow_wait is not None
        text += waits_for(left, bound, "answer", rendezvous, follows, follow_wait, now - began)
        client_logger().warning(text)

    def _connect(
        self, context: zmq.Context, monitored: bool = False
    ) -> list[tuple[zmq.Socket, list[int]]]:
        """A DEALER per receiver, connected; `monitored`: each monitored from before its
        connection (`get_monitor_socket` gives that monitor again): one made after can miss
        a loopback connection's EVENT_CONNECTED, a paused trainer then looking gone."""
        socks: list[tuple[zmq.Socket, list[int]]] = []
        for entry in self.entries:
            sock = control_dealer(context, entry, self.client.tuning.disconnected_timeout)
            if monitored:
                sock.get_monitor_socket(_LINK_EVENTS)
            sock.connect(str(entry["follow_endpoint"]))
            socks.append((sock, []))  # (the request ids asked, unanswered)
        return socks

    def _round(
        self,
        socks: list[tuple[zmq.Socket, list[int]]],
        done: list[ReceiptReply | None],
        until: float,
    ) -> list[ReceiptReply | None]:
        """Ask each receiver not done (unless a query to it is unanswered) and collect
        the valid answers that come by `until` (None: none from that receiver)."""
        client = self.client
        answers: list[ReceiptReply | None] = [None] * self.world
        poller = zmq.Poller()
        for rank, (sock, asked) in enumerate(socks):
            if done[rank] is not None:
                continue
            if not asked:
                asked.append(next(_request_ids))
                count = client.bye_counts[rank]
                sid, run = client.simulation_id, client.run_id
                sock.send(
                    encode_receipt_query(sid, asked[-1], count, client.rank, client.ranks, run)
                )
            poller.register(sock, zmq.POLLIN)
        waiting = {r for r in range(self.world) if done[r] is None}
        while waiting and (left := until - time.monotonic()) > 0:
            ready = dict(poller.poll(int(left * 1000) + 1))
            for rank in list(waiting):
                sock, asked = socks[rank]
                if sock not in ready:
                    continue
                reply = self._valid(sock.recv_multipart(), rank, asked)
                if reply is not None:
                    answers[rank] = reply
                    asked.clear()
                    waiting.discard(rank)
                    poller.unregister(sock)  # (a stray message after: not polled in vain)
        return answers

    def _valid(self, frames: list[bytes], rank: int, asked: list[int]) -> ReceiptReply | None:
        """The RECEIPT in `frames` if it is a valid answer to a query in `asked`; else
        None, its fault counted in the client's ``admission_rejected``."""
        try:
            if len(frames) != 1:
                raise ProtocolError("unexpected_frame", f"{len(frames)} frames, expected 1")
            reply = decode_receipt(frames[0])
            if reply.simulation_id != self.client.simulation_id or reply.request_id not in asked:
                raise ProtocolError("bad_request_id", "a reply to another query")
            if (reply.rank, reply.world_size) != (rank, self.world):
                raise ProtocolError("bad_rank", f"rank {reply.rank} of {reply.world_size}")
        except ProtocolError as exc:
            self.client.admission_rejected[exc.reason] += 1
            return None
        return reply
