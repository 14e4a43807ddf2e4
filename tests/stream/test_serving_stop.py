"""A `PredictServer` that stops: requests queued then are refused as not serving, a request
is stamped with the model version it is queued at, and a stopped server refuses to start
again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_server import INPUTS

from melissa_trainer import wire as protocol
from melissa_trainer.stream.serving import PredictServer

pytestmark = pytest.mark.e2e  # its tests start processes (simulations, clients)


def test_requests_queued_when_serving_stops_are_refused_not_serving(tmp_path: Path) -> None:
    """A request waiting in the queue when the trainer stops gets ``not_serving`` at
    once (its client falls back now, not at its timeout)."""
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path)
    srv.start()
    srv.serving = True
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.connect(srv.endpoint or "")
        sock.send_multipart(protocol.encode_predict(4, 8, 0, None, {"u": np.ones(4, np.float32)}))
        while srv.pending() < 1:
            srv.wait_pending(0.05)
        srv.stop()  # nobody drained it
        assert sock.poll(20_000), "no answer after stop"
        reply = protocol.decode_reply([f.buffer for f in sock.recv_multipart(copy=False)], 100)
        assert isinstance(reply, protocol.Refusal)
        assert (reply.request_id, reply.reason) == (8, "not_serving")
    finally:
        sock.close(linger=0)
        ctx.term()


def test_a_request_is_stamped_with_the_version_it_is_queued_at() -> None:
    """The I/O thread reads a request, then may be descheduled before it queues it
    while the trainer steps on: the request must carry the version at which it entered
    the queue (the latency bound counts from there), not the one when it was read. The
    delay is played here by queueing a request built at version 3 once the version is
    9 (the I/O thread's own call, `_queue_or_refuse`)."""
    from melissa_trainer.stream.serving_queue import Pending

    srv = PredictServer(INPUTS)
    srv.serving = True
    srv.version = 3
    request = protocol.PredictRequest(0, 1, 0, None, {"u": np.ones(4, np.float32)})
    late = Pending(request, 0.0, srv.version, b"peer")
    srv.version = 9
    srv._queue_or_refuse(late)
    assert srv.oldest_version() == 9
    (taken,) = srv.take(1)
    assert taken.version == 9


def test_a_stopped_server_refuses_to_start_again(tmp_path: Path) -> None:
    """After `stop` the I/O thread's stop flag stays set: a second `start` would bind
    and publish a socket that no thread reads (its clients waiting for their timeout).
    It must refuse instead, publishing nothing; a server that runs refuses too."""
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path)
    srv.start()
    try:
        with pytest.raises(RuntimeError, match="twice"):
            srv.start()
    finally:
        srv.stop()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="make a new PredictServer"):
        srv.start()
    assert list(tmp_path.iterdir()) == []
    srv.stop()  # (still idempotent)
