"""Signs that a close can see of small steps sent unbatched (`delivery`).

ZeroMQ copies a small message into its queue and says nothing when it leaves: a close
waiting behind a queue of such messages (``batch_bytes=0``, or the sends after a pause,
which go at once) saw no progress until its BYE was released, all of them read, and
gave up ``close_timeout`` after the last sign though the trainer was reading them. So
some of these messages are marks: sent without a copy, the frame a fresh object tracked
(`held.Released`) until ZeroMQ lets go of it, as every batch is
(`outbox.Outbox.in_flight`). Each release is a sign to the close.

The rule (`Marks.send`; the C client's the same, clients/c/src/send_held.c ``mt_mark_due``,
``MT_MARK_EVERY``, ``MT_MARK_BYTES``, ``MT_MARK_MOST``): a message is a mark when, from
the last mark (included) to it (excluded), at least `MARK_EVERY` messages and
`MARK_BYTES` bytes went, or `MARK_MOST` messages did; a client's first message is a
mark. So frames of at least ``MARK_BYTES / MARK_EVERY`` (16 KiB) are marked one in 16,
smaller ones one per 256 KiB (1 KiB frames: one in 256), and tiny ones one in 1024.

Why these. A mark costs its sender: a tracked send takes about ten times a copied one
(pyzmq's zero-copy path and its collector thread: ~50 against ~5 us a socket send on a
loaded 2-core node), ~45 us, so one in 16 added ~3 us (+20%) to each unbatched send of
4 floats (9.5 us); one in 1024 adds ~0.05 us (benchmarks/client_send.py, the 16 B row).
What bounds the time between two signs: ZeroMQ lets go of a message as the connection
takes it, which, the buffers full, is as the trainer reads; so between two signs the
trainer reads the messages between two marks: at most `MARK_EVERY` frames (each under
`field_part.INLINE_MAX_BYTES`, 64 KiB: 1 MiB), or at most `MARK_MOST` frames of less
than ``MARK_BYTES`` + 64 KiB in all. The BYE's acceptance and release are signs too, so
no more than the queue either: ``sndhwm`` messages (1000 by default, under `MARK_MOST`:
a full queue of tiny messages is bounded by itself, as before the marks) and what the
kernel buffers. A close therefore fails a trainer that reads only if it reads fewer than
1024 small messages, or 16 of 64 KiB, in ``close_timeout``: the default 1800 s allows
1.7 s a tiny message and 110 s for one of 64 KiB, far slower than any trainer that reads
at all (a step's training pacing a full buffer reads tens a second). The tests' close
(2 s; 56 KB steps, one read every 50 ms: one mark in 16, 0.8 s between signs) stays
inside too. A user of a short ``close_timeout`` with tiny unbatched steps and a trainer
slower than ``MARK_MOST / close_timeout`` messages a second should batch them.

Not thread-safe: used with the sockets' lock held.
"""

from __future__ import annotations

import zmq

from melissa_trainer.client.held import Released

__all__ = ["MARK_BYTES", "MARK_EVERY", "MARK_MOST", "Marks"]

#: at least this many messages from one mark (included) to the next (frames >= 16 KiB)
MARK_EVERY = 16
#: ... and at least this many bytes (smaller frames: one mark per 256 KiB sent)
MARK_BYTES = 256 * 1024
#: at most this many messages from one mark (included) to the next (tiny frames)
MARK_MOST = 1024


class Marks:
    """The small messages a client sent unbatched, the marks among them tracked."""

    def __init__(self) -> None:
        #: messages and bytes sent from the last mark (included): the first is a mark
        self._messages = MARK_MOST
        self._bytes = 0
        #: the trackers of the marked messages ZeroMQ may still hold, oldest first
        self._sent: list[Released] = []
        self._prune_at = 64  # (`_sent`'s length at which a send prunes it: amortised)

    def send(self, sock: zmq.Socket, frame: bytes) -> None:
        """Send `frame` (one message, blocking as the socket's SNDTIMEO says: `zmq.Again`,
        nothing sent, nothing counted), tracked if it is a mark (the module's rule)."""
        messages = self._messages
        if messages < MARK_MOST and (messages < MARK_EVERY or self._bytes < MARK_BYTES):
            sock.send(frame)
            self._messages = messages + 1  # (after the send: `zmq.Again` counts nothing)
            self._bytes += len(frame)
            return
        view = memoryview(frame)  # (a fresh object: its death is the release)
        released = Released(view)
        threshold = sock.copy_threshold
        sock.copy_threshold = 0  # (pyzmq would copy a frame under it: nothing to track)
        try:
            sock.send(view, copy=False)
        finally:
            sock.copy_threshold = threshold
        del view
        self._messages, self._bytes = 1, len(frame)  # (a retry after `zmq.Again`: a mark)
        sent = self._sent
        while sent and sent[0].done:  # (the front: the usual case)
            del sent[0]
        if len(sent) >= self._prune_at:  # (a mark held on one socket keeps the front)
            sent[:] = [r for r in sent if not r.done]
            self._prune_at = 2 * len(sent) + 64
        sent.append(released)

    def in_flight(self) -> int:
        """How many marked messages ZeroMQ still holds: a close that sees it fall sees
        the trainer take its messages (`delivery`)."""
        self._sent = [r for r in self._sent if not r.done]
        return len(self._sent)
