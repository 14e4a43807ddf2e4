"""`Transport`: how a `Client`'s messages reach its receivers, from the HELLO to the BYE.

The client (`melissa_trainer.client.client`) decides what is sent: the declared fields
of a time step, checked and placed. The transport holds what carries them: the ZeroMQ
context and the PUSH sockets (one per receiver, `sockets.connect`), the lock of their
user (the client's thread, or the outbox's flusher), the `Outbox` of small payloads
coalesced into BATCH messages, the large arrays ZeroMQ may still read (`HeldArrays`),
and what each receiver was sent (its BYE carries the count). It sends one step (the
general path; the usual send is specialized by `fast_send`, chosen here, once), flushes,
and closes: the BYE, and what is queued delivered, as long as the trainer is there
(`closing`, `patience`).

Every send is bounded by the client's `send_timeout` (a `TimeoutError` naming the
simulation, the rank and the step) or, without one, waits as long as back-pressure
lasts: as long as the trainer is there, not for a dead one (`send_wait`: a call blocked
past a slice is retried, until a receiver has been disconnected for
`disconnected_timeout`, `ReceiverGone`). Not thread-safe: one client's thread uses it;
the lock guards the sockets and the batches against the flusher thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client.closing import close_transport, waiting_notice
from melissa_trainer.client.fast_send import FastSend, SendClock, fast_large_sender, fast_sender
from melissa_trainer.client.field_part import FieldPart
from melissa_trainer.client.finite_check import FiniteCheck
from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.handshake_words import ENV
from melissa_trainer.client.held import HeldArrays
from melissa_trainer.client.marks import Marks
from melissa_trainer.client.outbox import Outbox
from melissa_trainer.client.send_errors import ReceiverGone
from melissa_trainer.client.send_wait import SendWait
from melissa_trainer.client.sockets import arm, connect, deadline_after
from melissa_trainer.client.tuning import DEFAULT_FAILED_CLOSE_TIMEOUT, ClientTuning
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire.routing import shift_of

__all__ = ["FAILED_CLOSE_TIMEOUT", "Transport"]

#: the default of `ClientTuning.failed_close_timeout`: seconds a client closed after a
#: failure (``close(bye=False)``, an exception in its ``with`` block) waits at most to
#: deliver what is queued (its run is restarted anyway)
FAILED_CLOSE_TIMEOUT = DEFAULT_FAILED_CLOSE_TIMEOUT

_pack_step = protocol.U64.pack  # the time step, between a field's prebuilt header parts


class Transport:
    """One client's sockets to its receivers and what they carry (module docstring).

    Connects when made (the context and sockets are released again if that fails);
    `open` then sends the HELLO. The client reads `steps` and `context`; `fast_path`
    hands the sockets, the lock, the outbox and the rest to the send specialized in
    `fast_send`.

    Args:
        endpoints: the receivers' endpoints, in training-rank order.
        tuning: how to send (`ClientTuning`).
        curve_keys: the receivers' CURVE public keys, or None.
        context: a ZeroMQ context to use; None: the transport's own, terminated by
            `release`.
        held: the large arrays sent without a copy (the client's `array_reuse`).
        finite: the client's check of float fields before they leave.
        send_timeout: the longest one send may block on back-pressure (None: no bound).
        simulation_id, rank, ranks: whose messages these are (BYE, error messages).
        restarted: what a send or close that gave up on a receiver gone adds to its
            message (`restart.RestartCheck.note`); None: nothing.
        routing: which receiver gets a step (`wire.routing`: None, ``t % W``; or
            ``"simulation_step"``, ``(simulation_id + t) % W``), as the HELLO says.
        key_from: where `curve_keys` came from (`handshake_words.KEYED`): the words of
            a refused handshake name it.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        tuning: ClientTuning,
        curve_keys: Sequence[str | None] | None,
        context: zmq.Context | None,
        held: HeldArrays,
        finite: FiniteCheck,
        send_timeout: float | None,
        simulation_id: int,
        rank: int,
        ranks: int,
        restarted: Callable[[], str] | None = None,
        routing: str | None = None,
        key_from: str = ENV,
    ) -> None:
        self.endpoints, self.tuning = endpoints, tuning
        self.routing = routing
        #: a step t goes to receiver ``(t + shift) % len(endpoints)`` (`wire.routing`)
        self.shift = shift_of(simulation_id, len(endpoints), routing)
        self.simulation_id, self.rank, self.ranks = simulation_id, rank, ranks
        self.send_timeout = send_timeout
        self.steps = [StepSet() for _ in self.endpoints]  # per receiver (for its BYE)
        self.held = held  # the large arrays ZeroMQ may still read
        self.marks = Marks()  # the small messages sent unbatched (a close's progress)
        self.finite = finite
        self.own_context = context is None
        self.context = zmq.Context() if context is None else context
        self.sockets: list[zmq.Socket] = []
        self.handshakes = Handshakes(f"simulation {simulation_id} rank {rank}", key_from)
        try:
            self.sockets = connect(
                self.context, self.endpoints, tuning, curve_keys, self.handshakes
            )
        except BaseException:
            self.release(0)
            raise
        self.lock = threading.Lock()  # the sockets' user: this thread or the flusher
        self.outbox: Outbox | None = None
        if tuning.batch_bytes > 0:
            self.outbox = Outbox(self.sockets, tuning.batch_bytes, tuning.batch_delay, finite)
            self.lock = self.outbox.lock
        self.batch_delay = tuning.batch_delay
        self.batch_record_max = tuning.batch_bytes // 2  # a bigger payload gains nothing
        #: how a call blocked past a slice waits on (`send_wait`)
        self.wait = SendWait(
            self.sockets,
            self.endpoints,
            self.handshakes,
            tuning.disconnected_timeout,
            send_timeout,
            f"simulation {simulation_id} rank {rank}",
            restarted,
            partial(waiting_notice, self),  # (a blocked send says what a close says)
            simulation_id,
        )
        self.clock = SendClock(self.wait.look)  # when the last send was (both paths)
        #: when the HELLO left (`open`): a rerun's first sign of life counts from it
        self.opened: float = time.monotonic()

    def open(self, hello: bytes) -> None:
        """Send `hello` to every receiver (bounded by `send_timeout`); released if it
        fails."""
        self.opened = time.monotonic()
        try:
            deadline = deadline_after(self.send_timeout)
            for index, sock in enumerate(self.sockets):
                self._push(sock, hello, deadline, None, index)
        except BaseException:
            self.release(0)
            raise

    # -- sending ----------------------------------------------------------------------

    def fast_path(self, fields: list[FieldPart], comm: object) -> FastSend | None:
        """The specialized usual send (see `fast_send`), or None if sends cannot take
        it: with a communicator (parts of any shape), a send timeout (a deadline and a
        rollback), or fields that are neither all batched nor all sent without a copy."""
        outbox = self.outbox
        if comm is not None or self.send_timeout is not None or not fields:
            return None
        if all(not f.inline for f in fields):
            return fast_large_sender(
                fields,
                self.sockets,
                self.lock,
                self.held,
                self.steps,
                self.clock,
                self.finite,
                self.wait.retry,
                self.shift,
            )
        if outbox is None or not all(
            f.inline and 0 < f.nbytes <= self.batch_record_max for f in fields
        ):
            return None
        return fast_sender(
            fields, outbox, self.steps, self.clock, self.batch_delay, self.wait.retry, self.shift
        )

    def send_step(self, step: int, prepared: Sequence[tuple[FieldPart, np.ndarray]]) -> None:
        """Send one time step's fields (checked and placed: `prepared`) to receiver
        ``(step + shift) % len(sockets)`` (`routing`): the general path, which every send
        may take.

        Small payloads of sends less than `batch_delay` apart go into batches; a send
        after a pause goes at once, after the records still batched for its receiver.
        Large arrays leave without a copy and are then waited for as `held` says.

        Raises:
            TimeoutError: back-pressure outlasted `send_timeout`; this step's batched
                records are taken back, its large arrays queued stay held.
        """
        index = (step + self.shift) % len(self.sockets)
        sock = self.sockets[index]
        step_bytes = _pack_step(step)
        deadline = deadline_after(self.send_timeout)
        now = time.monotonic()
        outbox = None if now - self.clock.last >= self.batch_delay else self.outbox
        self.clock.last = now
        if now >= self.clock.look_at:  # (the monitors, now and then: `SendWait.look`)
            self.clock.look_at = self.clock.look(now, step)
        queued = 0  # large arrays
        batch_heads: list[bytes] = []  # and the payloads of the step that go in batches
        batched: list[np.ndarray] = []
        check = self.finite.passes
        if not self.lock.acquire(timeout=-1 if self.send_timeout is None else self.send_timeout):
            raise self.timeout(step)
        # (only a bounded send can fail and need its records taken back)
        mark = None if outbox is None or deadline is None else outbox.mark(index)
        try:
            if outbox is None and self.outbox is not None:
                # A send after a pause goes at once, unbatched. Records of earlier steps
                # for this receiver that the flusher has not sent yet (a busy machine)
                # leave first: a socket's messages arrive in order, and so, then, do the
                # client's steps (the batch used to follow: 0, 20, 10, 30 at a FIFO).
                self._send_group(index, deadline, step)
            for f, arr in prepared:
                if f.local_size == 0:
                    continue
                if f.inline and outbox is not None and f.nbytes <= self.batch_record_max:
                    batch_heads.append(f.batch_head)  # coalesced (checked with its batch)
                    batched.append(arr)
                    continue
                # a float field that passes the check goes with FLAG_FINITE (`finite_check`)
                head = f.head_finite if f.checked and check(f.spec.name, step, arr) else f.head
                if not f.inline:
                    arm(sock, deadline)
                    frame = head + step_bytes + f.tail
                    try:
                        self.held.send(sock, frame, arr)
                    except zmq.Again as exc:  # a slice ran out: on while the trainer is there
                        self.wait.retry(
                            partial(self.held.send, sock, frame, arr), exc, step, index, deadline
                        )
                    queued += 1
                else:
                    frame = b"".join((head, step_bytes, f.tail, arr.data))
                    self._push(sock, frame, deadline, step, index)
            if outbox is not None and (
                outbox.append_step(batch_heads, index, step_bytes, batched, now)
                if batched
                else outbox.due(index, now)
            ):
                self._send_group(index, deadline, step)
        except ReceiverGone:
            if outbox is not None and mark is not None:
                outbox.rollback(index, mark)
            raise
        except TimeoutError:
            if outbox is not None and mark is not None:
                outbox.rollback(index, mark)  # this step's small fields were not queued
            raise self.timeout(step) from None  # (its large arrays queued stay held)
        finally:
            self.lock.release()
        try:
            self.held.after_send(queued, deadline)  # as array_reuse says
        except zmq.NotDone as exc:
            self.wait.retry(
                partial(self.held.after_send, queued, deadline), exc, step, None, deadline
            )
        self.steps[index].add(step)

    def flush(self) -> None:
        """Send the batched payloads now and wait until ZeroMQ is done with every large
        array sent; bounded by `send_timeout` (`TimeoutError`). Looks at the stop
        records first, as a send (`SendWait.look`, each flush: a solver's last call may be
        a flush, into a queue with room, after its trainer ended for good).

        Raises:
            StoppedForGood: the trainer stopped for good (the send's words,
                `send_verdict.FLUSHED` for the step).
        """
        now = time.monotonic()
        if self.clock.look_at != float("inf"):  # (a client that looks at its monitors)
            self.clock.look_at = self.clock.look(now, None)
        deadline = deadline_after(self.send_timeout)
        if self.outbox is not None:
            timeout = -1 if self.send_timeout is None else self.send_timeout
            if not self.lock.acquire(timeout=timeout):
                raise self.timeout(None)
            try:
                self.outbox.flush(deadline)
            except TimeoutError as exc:
                self.wait.retry(partial(self.outbox.flush, deadline), exc, None, None, deadline)
            finally:
                self.lock.release()
        try:
            self.held.release_all(deadline)
        except zmq.NotDone as exc:
            self.wait.retry(partial(self.held.release_all, deadline), exc, None, None, deadline)

    def timeout(self, step: int | None) -> TimeoutError | ValueError:
        """The error of a send (of `step`, or of a message) that `send_timeout` ended: a
        ValueError if a receiver refused the handshake (`SendWait.timeout`)."""
        return self.wait.timeout(step)

    def _send_group(self, index: int, deadline: float | None, step: int | None) -> None:
        """Send the batches bound for receiver `index` (`Outbox.send`), waiting on."""
        assert self.outbox is not None
        try:
            self.outbox.send(index, deadline)
        except TimeoutError as exc:
            self.wait.retry(partial(self.outbox.send, index, deadline), exc, step, index, deadline)

    def _push(
        self,
        sock: zmq.Socket,
        frame: bytes,
        deadline: float | None,
        step: int | None,
        index: int,
    ) -> None:
        arm(sock, deadline)
        try:
            self.marks.send(sock, frame)  # (the marks among them tracked: `marks`)
        except zmq.Again as exc:
            self.wait.retry(partial(self.marks.send, sock, frame), exc, step, index, deadline)

    # -- closing ----------------------------------------------------------------------

    def close(self, bye: bool, follow_in: str | None = None) -> None:
        """Deliver what is queued, say BYE (if `bye`), and release the sockets (and the
        context, if the transport's own): `Client.close`, whose docstring states the
        waits (`closing.close_transport`, and `follow_in`); once only.

        Raises:
            TimeoutError: with `bye`, what could not be delivered (dropped; everything
                is released all the same). Without `bye` it is logged instead.
            ValueError: with `bye`, a receiver refused the handshake.
        """
        close_transport(self, bye, follow_in)

    def abandon(self) -> None:
        """Release everything at once, dropping what is queued (the client follows a
        restarted trainer: `following`); idempotent."""
        if self.outbox is not None:
            self.outbox.close()
        if self.sockets or (self.own_context and not self.context.closed):
            self.release(0)

    def release(self, linger_ms: int) -> None:
        """Close the sockets, ZeroMQ delivering for at most `linger_ms` ms, and terminate
        the context if it is the transport's own (which waits for that delivery)."""
        self.handshakes.close()
        if hasattr(self, "wait"):  # (not yet made when connecting failed)
            self.wait.close()
        for sock in self.sockets:
            sock.close(linger=linger_ms)
        self.sockets = []
        if self.own_context:
            self.context.term()
