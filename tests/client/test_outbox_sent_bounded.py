"""`Outbox._sent` (the trackers of the batches ZeroMQ may still hold, `in_flight`) is
pruned from its front only at each send, and across all the receivers' sockets. A
receiver that holds one batch (not connected yet, restarting, slow) keeps the front
entry alive, and every batch delivered to the *other* receivers meanwhile stays in the
list, done: it grows with the data sent for as long as that one batch is held (a
weak reference and a lock per batch), though `in_flight` counts 1. Found in review
(hrev4); failed before: 5001 entries kept for 1 batch in flight. Now a send prunes the
whole list once it doubled since the last prune: bounded by the batches not yet let go
of (pyzmq's collector thread may lag under load: twice that, + 64)."""

from __future__ import annotations

import time

import pytest
import zmq

from melissa_trainer.client.outbox import Outbox

pytestmark = pytest.mark.timeout(60)

SENT = 5000
#: sends between two waits for pyzmq's collector thread. Over inproc, the reader's own
#: receive lets go of each zero-copy frame in this thread, holding Python's lock, by a
#: blocking send to the collector's queue (1,000 deep): once this loop outran the
#: collector by that much, the send waited for a collector that waited for the lock (a
#: hang of the test's 60 s, about 1 run in 80). Over TCP libzmq's own thread lets go,
#: without the lock, as a client's sends do. Only this test's reading thread paces.
PACE = 100


def test_the_trackers_of_delivered_batches_do_not_pile_up_behind_a_held_one() -> None:
    ctx = zmq.Context()
    held = ctx.socket(zmq.PUSH)
    held.connect("inproc://hrev4-nobody-binds-this")  # (its batch stays queued: held)
    pull = ctx.socket(zmq.PULL)
    pull.bind("inproc://hrev4-reader")
    flowing = ctx.socket(zmq.PUSH)
    flowing.connect("inproc://hrev4-reader")
    try:
        box = Outbox([held, flowing], 65536, 0.02, finite=None)  # type: ignore[arg-type]
        frames = [bytearray(b"header"), bytearray(b"x" * 64)]
        with box.lock:
            box._send_tracked(held, frames, 0)
            for n in range(SENT):
                box._send_tracked(flowing, frames, 0)
                last = box._sent[-1]
                pull.recv_multipart()  # (read: ZeroMQ lets go of it)
                if n % PACE == PACE - 1:  # (the collector's queue drained: see PACE)
                    deadline = time.monotonic() + 30
                    while not last.done and time.monotonic() < deadline:
                        time.sleep(0.001)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(r.done for r in box._sent[1:]):
            time.sleep(0.01)  # (pyzmq lets go of the frames on its own thread)
        # what the list holds between two sends (`in_flight` alone prunes it all, at close)
        assert len(box._sent) < SENT // 5, (
            f"{len(box._sent)} trackers kept for 1 batch in flight: _sent grows with "
            f"every batch sent while one receiver holds the oldest"
        )
    finally:
        for sock in (held, flowing, pull):
            sock.close(0)
        ctx.term()
