"""The receiver's data path: from its socket to `Ingest`, one message at a time.

Per message: ``recv(copy=False)`` of the first frame (its ``more`` flag comes with it:
`Socket.get(RCVMORE)` would cost an enum lookup in pyzmq per message), read as bytes,
or in place for a BATCH of at least `_VIEW_MIN` bytes (its records are copied once, into
their block: `assembly.block_of`; a copy into bytes first would be a second); only a
DATA header without the INLINE flag makes it look for a second frame, received with
``copy=False``; ``protocol.decode`` (memoized for DATA headers, which differ only by
their time step: `data_decoder.DataDecoder`); validation against the simulation's
HELLO; dedup against the simulation's completed-step bits; reassembly if the step comes
in parts; ``buffer.put`` of each complete sample (a BATCH's as one block), exactly once
per (simulation, time step).

Memory: a field sent whole in a payload frame keeps that ZeroMQ frame as its memory (no
copy); an INLINE payload is copied once out of the received bytes (aligned, writable;
see `assembly.payload_array`); a BATCH's records once out of its frame, into their block;
a field split over client ranks is copied once from each part into an array allocated
for it.

`DataPath` is the base of `Receiver` (which binds the socket and owns its life), below it
`IngestLoop` (who ingests, and when); the split is by concept, the object is one.
"""

from __future__ import annotations

import time
from typing import Any

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.stream import heap
from melissa_trainer.stream.connections import ConnectionWatch
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.ingest_loop import IngestLoop
from melissa_trainer.stream.twin_hellos import peer_address
from melissa_trainer.wire import (
    BATCH,
    BYE,
    DATA,
    FLAG_INLINE,
    KIND_AT,
    Abandon,
    Batch,
    Bye,
    Data,
    Hello,
    ProtocolError,
)
from melissa_trainer.wire.messages import StudyEnd
from melissa_trainer.wire.study_end import STUDY_END

__all__ = ["DataPath"]

_POLLIN, _NOBLOCK = int(zmq.POLLIN), int(zmq.NOBLOCK)
#: a BATCH frame of at least this many bytes is read in place, not copied into bytes
_VIEW_MIN = 4096


class DataPath(IngestLoop):
    """`IngestLoop._serve` for a receiver's socket (see the module docstring).

    The subclass sets, before its thread starts: `_socket`, `_decode` (a `DataDecoder`),
    `_watch` (the socket's `ConnectionWatch`), `_recycle` (`ReceiverConfig.recycle_frames`)
    and `_rcvhwm`. Called by the ingester only (one thread at a time, holding `_lock`).
    """

    _decode: DataDecoder
    _watch: ConnectionWatch | None
    _recycle: bool
    _rcvhwm: int

    def _serve(self, pump: bool, wait: float = 0.0) -> None:
        """Receive and ingest messages, holding `_lock`.

        In the thread (`pump` False): blocking, until the training thread pumps again.
        In `pump`: what is waiting, within the budget, while the buffer has room; if
        nothing is, first waits up to `wait` seconds for a message.
        """
        sock, ing, feeder = self._socket, self.ingest, self._feeder
        watch = self._watch
        assert watch is not None
        assert sock is not None
        if feeder.overflow and not feeder.flush(block=not pump):
            return
        # A pump asks `zmq_poll` (the backend's, not `Socket.poll`, which builds a Poller
        # per call) whether a message waits: a third of the cost of a failed recv (an
        # Again exception), and most pumps of large messages find the socket empty.
        recv, decode = sock.recv, self._decode
        poll, polled = zmq.zmq_poll, [(sock, _POLLIN)]
        on_data, received = ing.data, ing.received
        monotonic, takeover = time.monotonic, self._takeover
        deadline = monotonic() + self._pump_budget
        wait_ms = max(1, round(wait * 1000)) if wait > 0 else 0
        served = False  # a message was ingested by this call
        while True:
            if pump:
                if feeder.overflow or monotonic() > deadline:
                    return
                if wait_ms:
                    # A pump that may wait asks once, waiting (a waiting message answers at
                    # once): one `zmq_poll` per message where the reader waits for each,
                    # not an empty one before the wait. The idle clock, logs and `finish`
                    # then hear of the empty socket after the wait (up to `wait` later).
                    ready = not self._ended and poll(polled, wait_ms)
                    wait_ms = 0  # once per pump: the reader looks at its buffer next
                    if not ready:
                        self._on_idle()
                        return
                    deadline = monotonic() + self._pump_budget
                elif not poll(polled, 0):
                    # The idle clock, logs and `finish` need one empty poll per pump: the
                    # one before any message (a pump that ingested returns; the reader's
                    # next pump finds the socket empty first, if it is).
                    if not served:
                        self._on_idle()
                    return
                served = True
                try:
                    head = recv(_NOBLOCK, copy=False)  # (a whole message waits: poll said so)
                except zmq.Again:  # pragma: no cover - only if the poll was stale
                    return
            else:
                if self._attention:
                    self._on_request()
                if monotonic() - self._last_pump < takeover:
                    return  # the training thread took over
                try:
                    head = recv(copy=False)  # blocks up to RCVTIMEO
                except zmq.Again:
                    self._on_idle()
                    continue
            # A large BATCH is read in the frame's memory (its samples are copied out once,
            # into their block); anything else as bytes (the DATA decoder's memo keys on them).
            frame: Any
            if len(head) < _VIEW_MIN:
                frame = head.bytes
            else:
                frame = head.buffer
                if frame[KIND_AT] != BATCH:
                    frame = head.bytes
            size, part = len(frame), None
            # Only a DATA header without INLINE has a payload frame; other extra frames
            # are not looked for (they would be read, and rejected, as messages).
            if size > 7 and frame[5] == DATA and not frame[6] & FLAG_INLINE and head.more:
                part = recv(copy=False)
                size += len(part)
            if not received(size, self._ended):
                # (rank 0's STUDY_END is expected after the end: `study_end`)
                if size > KIND_AT and frame[KIND_AT] == STUDY_END:
                    ing.ignored_after_end -= 1
                elif ing.twins.pending and size > KIND_AT and frame[KIND_AT] == BYE:
                    self._late_bye(head, frame)  # (ignored, but judges a twin)
                continue
            try:
                msg = decode(frame) if part is None else decode(frame, part.buffer)
            except ProtocolError as exc:
                ing.reject(exc.reason, _simulation_of(frame), str(exc))
                continue
            if type(msg) is Data:
                on_data(msg, part is None)
            elif type(msg) is Batch:
                ing.batch(msg)
            elif type(msg) is Hello:
                # (first: a failure handed before the kill of its attempt is heard
                # before the restart's HELLO, `nonfinite_handoff`)
                self._hear_handoffs(now=True)
                ing.hello(msg)
                # (which connection is whose, and whether it carries data: `connections`;
                # no ledger once ingested: refused, each message of it rejected, none lost)
                ledger = ing.sims.get(msg.simulation_id)
                watch.hello(head, msg, ledger, refused=ledger is None)
                fd, peer = head.get(zmq.SRCFD), peer_address(head)  # (`twin_hellos`)
                ing.twins.hello(fd, msg, watch.owner_of, peer)
                if self._recycle:
                    self._recycle_frames_of(msg.simulation_id)
            elif type(msg) is Bye:
                ing.twins.bye(head.get(zmq.SRCFD), msg)  # (before the stream may end)
                ing.bye(msg)
                watch.bye(head, msg)
            elif type(msg) is StudyEnd:
                self.study_end.told(msg, self._ended)
            else:
                assert type(msg) is Abandon
                ing.abandon(msg)

    def _late_bye(self, head: zmq.Frame, frame: Any) -> None:
        """A BYE read after the end of the stream while a twin suspect awaits judgment:
        told to `twin_hellos` only (the first connection of a suspect saying BYE was a
        twin; the end's list waits for it: `IngestLoop._tell_twins`). One that does not
        decode is left, as any message after the end."""
        try:
            msg = self._decode(frame)
        except ProtocolError:
            return
        if type(msg) is Bye:
            self.ingest.twins.bye(head.get(zmq.SRCFD), msg)
            self._tell_twins()

    def _recycle_frames_of(self, simulation_id: int) -> None:
        """After a HELLO: if its simulation is known here (the HELLO accepted, now or
        before), let malloc recycle the frames of its large fields
        (`ReceiverConfig.recycle_frames`), sized by the fields it declared and by what
        may be held of them at once: the buffer's samples and the socket's queue
        (``rcvhwm`` + 2 messages). Idempotent: a HELLO is rare, the call cheap."""
        sim = self.ingest.sims.get(simulation_id)
        if sim is None:
            return
        largest = max(f.size * f.dtype.itemsize for f in sim.fields)
        if largest <= heap.FRAME_MIN_BYTES:
            return
        held = self._buffer.capacity + self._rcvhwm + 2
        if not heap.recycle_frames(largest, held * sim.sample_nbytes):
            self._recycle = False  # not glibc, or frames too large for its heap: once

    def _on_idle(self) -> None:
        # the socket was found empty: the closes read so far can be judged (what their
        # connections sent, BYE included, has been read: `connections`), before the
        # base may end the stream (a loss seen while it ran is warned of). Each time:
        # the watch reads its monitor's events here too (one ZMQ_EVENTS read if none)
        watch = self._watch
        if watch is not None:
            watch.settle(self._socket_empty)
            if self.ingest.twins.pending:  # (a HELLO of a connection's owner, open: judged)
                self.ingest.twins.settle(watch.owner_of, self._socket_empty)
            self._tell_twins()  # (the end's list, if it waited for a judgment: one bool)
        super()._on_idle()

    def _socket_empty(self) -> bool:
        """No message waits in the socket (the ingester, or `stop` after the thread)."""
        return self._socket is None or not zmq.zmq_poll([(self._socket, _POLLIN)], 0)


def _simulation_of(frame: bytes) -> int | None:
    """The simulation id of a message that failed to decode, if its prefix is readable."""
    return protocol.peek_simulation_id(frame)
