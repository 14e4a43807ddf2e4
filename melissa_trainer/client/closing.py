"""How a client's transport closes: what is batched and held delivered, the BYE (whose
release says that everything before it left), each receiver's handshake accepted, then
the sockets released with what is left of the close timeout as their linger.

`close_transport` works on a `Closable`: the parts of a `transport.Transport` it reads
(a narrow Protocol, so that this module imports nothing of the transport's). The waits
are `delivery.DeliveryWait`'s (a `patience.CloseWait`): as long as the trainer is there,
bounded by `ClientTuning.close_timeout` *without progress* (or `failed_close_timeout`
after a failure; progress: a message the sockets accepted, a frame ZeroMQ let go of,
`delivery`); a receiver
gone for `disconnected_timeout` ends them. A close whose receiver has been disconnected
a few seconds (`peer_watch.notice_after`) logs one warning saying what it waits for and
how long in all (`waiting_notice`; a blocked send's says the same, `send_wait`), then
nothing until it ends; one that gives up says what was sent there, and, unless it
follows a restarted trainer (`following`, which says it then), what to do.

A close after a failure (``bye=False``) waits for nothing of a receiver disconnected:
not while its queues drain (``disconnected_timeout`` 0), nor, once they are through, for
its handshake, nor in the linger (`CloseWait.not_connected`: a send that gave up on it,
an endpoint where no trainer ever listened used to wait the whole
`failed_close_timeout` there, for nothing), nor of a peer that is not a receiver (another
program at the endpoint, an HTTP server: TCP accepted, no ZeroMQ handshake in
`handshake.NOT_ZMQ_AFTER` s; it can take nothing). Safe, because nothing is lost: the close
sends no BYE, so the trainer does not take the simulation for complete; it is run again
(the launcher restarts it; a solver started by hand is told to by the error it failed
with), sends every step again, and the receivers keep one copy of each. What is dropped
could reach only a receiver that comes back within the linger, and the run again sends
it all the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client import patience
from melissa_trainer.client.delivery import DeliveryWait
from melissa_trainer.client.gave_up import (
    DeliveryFailed,
    Preempted,
    StopSaid,
    run_again,
    stop_sentence,
    taken_of,
    waits_for,
)
from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.held import HeldArrays, Released
from melissa_trainer.client.outbox import Outbox
from melissa_trainer.client.send_wait import SendWait
from melissa_trainer.client.sockets import arm
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.step_set import StepSet

if TYPE_CHECKING:  # pragma: no cover
    import logging

    from melissa_trainer.client.marks import Marks

__all__ = [
    "Closable",
    "TrainerPreempted",
    "TrainerStopped",
    "client_logger",
    "close_transport",
    "send_tracked",
    "waiting_notice",
]


class TrainerStopped(DeliveryFailed):
    """A close gave up on a receiver whose trainer stopped for good (its stop record:
    the run ended, or failed): no restarted trainer is waited for (`following`)."""


class TrainerPreempted(Preempted):
    """A close gave up on a receiver gone whose trainer's stop record says it was
    preempted: a resumed trainer is waited for and followed (`following`), and if
    none comes, the error says that no resume came (`follow_gave_up`)."""


def client_logger() -> logging.Logger:
    """The client's logger, ``melissa_trainer.client.client`` (`finite_check` warns
    there too). `logging` (with `traceback`, `string`...) is imported here, on the rare
    path that logs, not with the client, whose every simulation's start-up it would
    otherwise lengthen (`benchmarks/client_startup.py`; docs/measured.md, "Simulation
    start-up")."""
    import logging

    return logging.getLogger("melissa_trainer.client.client")


class Closable(Protocol):
    """What `close_transport` reads of a transport (`transport.Transport` is one)."""

    @property
    def sockets(self) -> list[zmq.Socket]: ...
    @property
    def endpoints(self) -> Sequence[str]: ...
    @property
    def steps(self) -> list[StepSet]: ...
    @property
    def tuning(self) -> ClientTuning: ...
    @property
    def held(self) -> HeldArrays: ...
    @property
    def outbox(self) -> Outbox | None: ...
    @property
    def marks(self) -> Marks: ...
    @property
    def lock(self) -> threading.Lock: ...
    @property
    def wait(self) -> SendWait: ...
    @property
    def handshakes(self) -> Handshakes: ...
    @property
    def own_context(self) -> bool: ...
    @property
    def simulation_id(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def ranks(self) -> int: ...

    def release(self, linger_ms: int) -> None:
        """Close the sockets (ZeroMQ delivering for `linger_ms` ms), and the context
        if the transport's own."""


@contextmanager
def _closing(outbox: Outbox) -> Iterator[None]:
    """The sockets' lock of a batching client, its flusher stopped first (it would
    otherwise wait for the lock, and the closing thread sends what it held)."""
    outbox.close()
    with outbox.lock:
        yield


def close_transport(t: Closable, bye: bool, follow_in: str | None = None) -> None:
    """Deliver what is queued, say BYE (if `bye`), and release the sockets (and the
    context, if the transport's own): `Client.close`, whose docstring states the waits;
    once only. `follow_in`: the rendezvous whose restarted trainer the caller waits for
    and follows if this close gives up (`following`; its notice and its error say so),
    or None.

    Raises:
        TimeoutError: with `bye`, what could not be delivered (dropped; everything is
            released all the same). Without `bye` it is logged instead.
        ValueError: with `bye`, a receiver refused the handshake.
    """
    tuning = t.tuning
    close_timeout, disconnected = tuning.close_timeout, tuning.disconnected_timeout
    setting = "close_timeout"
    failed = tuning.failed_close_timeout
    if not bye:
        disconnected = 0.0
        # the lower bound is the one that ends the wait: the one a message names
        if failed is not None and (close_timeout is None or failed < close_timeout):
            close_timeout, setting = failed, "failed_close_timeout"
    wait = DeliveryWait(  # (bounded by close_timeout without progress: `delivery`)
        t.sockets,
        t.endpoints,
        close_timeout,
        disconnected,
        setting=setting,
        after_failure=not bye,
        handshakes=t.handshakes,
        watch=t.wait.watch,  # (what a blocked send saw of the receivers)
        stopped=t.wait.stopped,  # (a trainer that stopped for good: its stop record)
        notice=partial(waiting_notice, t, follow_in, time.monotonic()) if bye else None,
        preempted=t.wait.preempted,  # (said in place of "died", with a BYE or without)
        seen=t.wait.seen if bye else None,  # (a restarted trainer: followed at once)
        simulation_id=t.simulation_id,
    )
    failure = why = None
    with t.lock if t.outbox is None else _closing(t.outbox):
        wait.watch_progress(t.held, t.outbox, t.marks)  # (the flusher stopped: counted)
        if t.outbox is not None:
            why = wait.until_done(t.outbox.flush, TimeoutError)
            failure = None if why is None else "batched data"
        if bye and failure is None:
            for sock, steps in zip(t.sockets, t.steps, strict=True):
                bye_frame = protocol.encode_bye(t.simulation_id, t.rank, t.ranks, steps.count)
                why = wait.until_done(partial(send_tracked, t.held, sock, bye_frame), zmq.Again)
                if why is not None:
                    failure = "BYE"
                    break
        if failure is None:  # (the BYE's release says that all before it left)
            why = wait.until_done(t.held.release_all, zmq.NotDone)
            failure = None if why is None else "queued messages"
        if failure is None and not bye:  # (after a failure: a receiver not connected,
            why = wait.not_connected()  # (or no receiver, is not waited for: docstring)
            failure = None if why is None else "queued messages"
        down_ends = not bye  # (once: a receiver still down after it is waited for as before)
        while failure is None:  # (the linger starts once every receiver accepted)
            why = wait.refusal = t.handshakes.wait(list(t.endpoints), wait.deadline, down_ends)
            if why is None and not t.handshakes.accepted():
                # (after a failure, a receiver gone as it connected is not waited for
                # either; else the deadline passed: no connection in time, nothing delivered)
                why = wait.not_connected()
                if why is None and wait.left_ms() != 0:  # (-1: no deadline)
                    down_ends = False  # (never a loop on a down state `not_connected` waits on)
                    continue  # (connected again meanwhile: its handshake is waited for)
                why = why or wait.timed_out()
            failure = None if why is None else "queued messages"
            break
        down = wait.down_endpoints()  # (whose messages were not delivered, if it failed)
        wait.close()
    linger = 0 if failure is not None else wait.left_ms()  # (a failure drops what is left)
    started = time.monotonic()
    t.release(linger)
    # ZeroMQ drops what the linger period did not deliver, and says nothing; a
    # termination that took the whole period is the sign of it.
    elapsed = time.monotonic() - started
    if failure is None and t.own_context and linger > 0 and elapsed >= 0.95 * linger / 1000:
        failure = "queued messages"
        why = wait.timed_out()
    if failure is not None:
        message_text = f"simulation {t.simulation_id} rank {t.rank}: {failure} not delivered {why}"
        if bye and wait.refusal is not None:
            raise ValueError(message_text)  # (as a refused key of the serving socket)
        said = wait.stop_said
        counts, spans = [s.count for s in t.steps], [s.span() for s in t.steps]
        ended = said is not None and bye and said.kind == "ended"
        never = t.handshakes.never_connected(t.endpoints)
        if ended and not never and t.wait.all_taken(counts, spans):
            return  # (the run ended, every step sent taken: the receipts confirm, warned)
        if said is not None and wait.refusal is None:  # (not followed: no trainer comes back)
            message_text = stop_first(t, failure, bye, said, wait.stop_down)
            if bye:
                raise said.error(message_text)  # (TrainerStopped, or SimulationRefused...)
            client_logger().warning(message_text)
            return
        # (a receiver gone because its trainer was restarted: say so, and what to do)
        note = t.wait.restarted() if wait.refusal is None else ""
        sent = fix = ""  # (what was sent there, what to do; not when no connection was
        # ever made: the endpoint is said wrong; a follower says what to do once it waited)
        if bye and wait.refusal is None and not patience.never_note(t.handshakes, t.endpoints):
            sent = _sent_there(t, down)
            fix = f" {run_again(t.simulation_id)}" if not note and follow_in is None else ""
        message_text += ("." if sent or note else "") + sent + note + fix
        if bye:
            raise (TrainerPreempted if wait.preempted_said else DeliveryFailed)(message_text)
        client_logger().warning(message_text)


def _sent_there(t: Closable, down: Sequence[str]) -> str:
    """What the client knows of what it did not deliver: the steps it sent to the
    receivers `down` (all of them if none is known down). ZeroMQ does not say how many
    of them it still held."""
    where = [i for i, e in enumerate(t.endpoints) if e in down] or list(range(len(t.endpoints)))
    sent = sum(t.steps[i].count for i in where)
    to = ", ".join(t.endpoints[i] for i in where)
    return (
        f" It had sent {sent} time step(s) to {to}: what ZeroMQ still held of them (it does "
        f"not say how many) and the BYE are dropped."
    )


def waiting_notice(
    t: Closable,
    follow_in: str | None,
    started: float,
    down: tuple[str, ...],
    since: float,
    left: float | None,
    bound: str,
    doing: str = "closing",
) -> None:
    """Log, once, what a close that cannot deliver waits for (`peer_watch.Notice`: the
    receivers `down` since `since`, the wait lasting at most `left` more seconds, ended
    by `bound`), then, if it follows (`follow_in`), for how long it waits for a
    restarted trainer, the whole wait counted from `started`, and which settings
    shorten it. Nothing more is logged until the close ends. `doing`: "closing", or
    what a blocked send does ("sending time step 7", `send_wait`), which says the same
    of the send."""
    now, follow = time.monotonic(), t.tuning.follow_timeout
    clock = time.strftime("%H:%M:%S", time.localtime(time.time() - (now - since)))
    sent = sum(t.steps[i].count for i, e in enumerate(t.endpoints) if e in down)
    who, where = f"simulation {t.simulation_id} rank {t.rank}", ", ".join(down)
    closing = doing == "closing"
    never = bool(t.handshakes.never_connected(down))
    preempted = None if never else t.wait.preempted()  # (its stop record: not "died")
    # (a wait gives a receiver its timeout from its start: said when it went down before)
    of = f", {now - started:.0f} s of them in this wait" if since < started - 0.5 else ""
    if never:  # (not a trainer gone: said as `never_note`)
        text = (
            f"{who}: {doing}, no receiver ever accepted a connection at {where} (tried "
            f"since {clock}): check the endpoint (the trainer's rank_N.json) or start the "
            f"trainer first. "
        )
    else:
        text = (
            f"{who}: {doing}, the trainer's receiver at {where} is disconnected since "
            f"{clock} ({now - since:.0f} s{of}: "
            f"{preempted or 'the trainer died or stopped, or its node'}): "
            f"{sent} time step(s) were sent to it"
        )
        text += (
            "; what ZeroMQ still holds of them and the BYE are not delivered. " if closing else ". "
        )
    action, follows = "close" if closing else "send", follow_in is not None
    what = "connect" if never else "reconnect"  # (one never connected: no "re")
    resumed = preempted is not None
    text += waits_for(left, bound, what, follow_in, follows, follow, now - started, action, resumed)
    client_logger().warning(text)


def stop_first(
    t: Closable, failure: str, bye: bool, said: StopSaid, down: Sequence[str] = ()
) -> str:
    """What a close says when a receiver's stop record explains why its messages
    (`failure`: "queued messages", "BYE" or "batched data") were not delivered: one
    sentence, the record's reason first, then what was not delivered and where (`down`:
    the receivers disconnected, whose messages those are; the record's receiver if
    none is given), with the receiver whose record said why if it is another, then
    the record's facts and what to do (`gave_up.stop_sentence`, a send's words too).
    The C client says the same words (clients/c/src/stop_said.c)."""
    what = (
        "queued messages (the BYE among them)" if bye and failure == "queued messages" else failure
    )
    what, verb = f"its {what}", "was" if failure == "BYE" else "were"
    if said.kind == "ended" and said.held is not None and said.endpoint in t.endpoints:
        # (the counts a receipt's refusal gives too, `StopRecords.decide`: without them a
        # user trial could not tell how much of the simulation its trainer had taken)
        # (`taken_of`: none said of steps held outside those sent, another run's)
        sent = t.steps[list(t.endpoints).index(said.endpoint)]
        of = taken_of(said.held, said.held_span, sent.count, sent.span())
        said = replace(said, reason=f"{said.reason}{of}")
    return stop_sentence(f"simulation {t.simulation_id} rank {t.rank}", what, verb, said, down)


def send_tracked(held: HeldArrays, sock: zmq.Socket, frame: bytes, deadline: float) -> None:
    """Send `frame` without a copy, by `deadline` (else `zmq.Again`, nothing sent),
    and hold it until ZeroMQ has sent it on.

    The BYE's release is the one sign that the connection took everything before
    it (a socket's messages leave in order): `close_transport` waits for it with the arrays
    held, in slices, while the receiver is there, and only then closes the sockets
    (with the caller's context, closing returns at once and ZeroMQ lingers in the
    background, dropping what it could not deliver without a word).
    """
    view = memoryview(frame)  # (a fresh object: its death is the release)
    threshold = sock.copy_threshold
    sock.copy_threshold = 0  # (pyzmq would copy a small frame: nothing to track)
    arm(sock, deadline)
    try:
        sock.send(view, copy=False)
    finally:
        sock.copy_threshold = threshold
    held.add(Released(view), len(frame))
