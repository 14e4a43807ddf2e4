"""Signs that a close can see of small steps sent unbatched (`delivery`).

ZeroMQ copies a small message into its queue and says nothing when it leaves: a close
waiting behind a queue of such messages (``batch_bytes=0``, or the sends after a pause,
which go at once) saw no progress until its BYE was released, all of them read, and
gave up ``close_timeout`` after the last sign though the trainer was reading them. So
one such message in `MARK_EVERY` is sent without a copy, its frame a fresh object
tracked (`held.Released`) until ZeroMQ lets go of it, as every batch is
(`outbox.Outbox.in_flight`): a close then sees a sign at least every `MARK_EVERY`
messages the trainer takes. The others stay copies: a tracked send costs about ten
times a copied one (pyzmq's zero-copy path and its collector thread: 53 against 5 us
a socket send, measured on a loaded 2-core node), so one in `MARK_EVERY` adds about
3 us to each on average (a whole unbatched `Client.send` of 4 floats took 9.5 us, best
of three, 11.6 us with the marks; the node too loaded to say better). The C client
marks the same messages (clients/c/src/send.c, ``MT_MARK_EVERY``).

Not thread-safe: used with the sockets' lock held.
"""

from __future__ import annotations

import zmq

from melissa_trainer.client.held import Released

__all__ = ["MARK_EVERY", "Marks"]

#: one small message sent unbatched in this many is tracked (the first of a client
#: included): a close sees progress at least every this many messages the trainer takes
MARK_EVERY = 16


class Marks:
    """The small messages a client sent unbatched, one in `MARK_EVERY` tracked."""

    def __init__(self) -> None:
        self._count = 0  # messages sent
        #: the trackers of the marked messages ZeroMQ may still hold, oldest first
        self._sent: list[Released] = []
        self._prune_at = 64  # (`_sent`'s length at which a send prunes it: amortised)

    def send(self, sock: zmq.Socket, frame: bytes) -> None:
        """Send `frame` (one message, blocking as the socket's SNDTIMEO says: `zmq.Again`,
        nothing sent), tracked if it is the one in `MARK_EVERY`."""
        if self._count % MARK_EVERY:
            sock.send(frame)
            self._count += 1
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
        self._count += 1  # (after the send: a retry after `zmq.Again` marks it again)
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
