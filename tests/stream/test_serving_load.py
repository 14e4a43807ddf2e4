"""The serving channel under load and abuse: a flood is refused beyond `max_queue` and the
queue never holds more; malformed requests (a raw DEALER writing frames by hand) are
rejected, counted and logged, nothing is unpickled, and the others are still served; a
client that reads no reply blocks nobody; a request older than its timeout is dropped
unanswered.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_server import drain
from serving_runs import PREDICTING, run_client

from melissa_trainer import wire as protocol
from melissa_trainer.stream.serving import PredictServer

pytestmark = pytest.mark.e2e  # its tests start processes (simulations, clients)


FLOOD = """
import json, os
import numpy as np
import zmq
from melissa_trainer import wire as protocol

n = int(os.environ["N"])
ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.connect(os.environ["ENDPOINT"])
for i in range(n):
    sock.send_multipart(protocol.encode_predict(9, i, 0, None, {"u": np.full(4, i, np.float32)}))
replies = {}
while len(replies) < n - int(os.environ["QUEUED"]):
    msg = protocol.decode_reply([f.buffer for f in sock.recv_multipart(copy=False)], 1 << 20)
    replies[msg.request_id] = getattr(msg, "reason", "answered")
sock.send(b"ready")  # (a message the server rejects: the test's cue that all were read)
while len(replies) < n:
    msg = protocol.decode_reply([f.buffer for f in sock.recv_multipart(copy=False)], 1 << 20)
    replies[msg.request_id] = getattr(msg, "reason", "answered")
print(json.dumps(replies))
sock.close(linger=0)
ctx.term()
"""


def test_flood_refused_beyond_the_queue(server: PredictServer, tmp_path: Path) -> None:
    """100 requests at once into a queue of 4 nobody drains: 96 refused ``busy``, 4
    queued (never more); drained, those 4 are answered."""
    server.serving = True
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    env = {**os.environ, "N": "100", "QUEUED": "4", "ENDPOINT": server.endpoint or ""}
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        while server.telemetry().get("rejected_truncated", 0) == 0:  # the cue
            assert proc.poll() is None
            threading.Event().wait(0.01)
        assert server.pending() == 4
        stop = threading.Event()
        thread = drain(server, stop)
        out, _ = proc.communicate(timeout=60)
        stop.set()
        thread.join()
    finally:
        proc.kill()
        proc.wait()
    replies = json.loads(out)
    answered = sorted(int(k) for k, v in replies.items() if v == "answered")
    assert answered == [0, 1, 2, 3]  # the first four, in order
    assert sorted(v for v in replies.values() if v != "answered") == ["busy"] * 96
    counts = server.telemetry()
    assert counts["refused_busy"] == 96 and counts["answered"] == 4 and counts["requests"] == 100


MALFORMED = """
import json, os, pickle
import numpy as np
import zmq
from melissa_trainer import wire as protocol

class Evil:
    def __reduce__(self):
        return (open, (os.environ["MARKER"], "w"))  # unpickling it creates the file

ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.connect(os.environ["ENDPOINT"])
good = protocol.encode_predict(5, 1, 0, None, {"u": np.ones(4, np.float32)})
sock.send_multipart([pickle.dumps(Evil())])                       # bad_magic
sock.send_multipart([pickle.dumps(Evil()), pickle.dumps(Evil())]) # bad_magic
sock.send_multipart([bytes(good[0])[:-3], good[1]])               # truncated, refused
sock.send_multipart([bytes(good[0])])                             # missing_frame, refused
wrong = protocol.encode_predict(5, 3, 0, None, {"u": np.ones((2, 2), np.float32)})
sock.send_multipart(wrong)                                        # bad_inputs, refused
sock.send_multipart([bytes(good[0]), pickle.dumps(Evil())])       # bad_size, refused
replies = []
for _ in range(4):
    msg = protocol.decode_reply([f.buffer for f in sock.recv_multipart(copy=False)], 1 << 20)
    replies.append([msg.request_id, msg.reason])
print(json.dumps(replies))
"""


def test_malformed_requests_rejected_counted_logged_none_unpickled(
    server: PredictServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server.serving = True
    stop = threading.Event()
    thread = drain(server, stop)
    marker = tmp_path / "unpickled"
    try:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.stream.serving"):
            bad = run_client(
                MALFORMED, tmp_path, ENDPOINT=server.endpoint or "", MARKER=str(marker)
            )
            # a well-behaved client of the same server is still served
            (tmp_path / "sub").mkdir()
            good = run_client(
                PREDICTING,
                tmp_path / "sub",
                SIM="2",
                N="2",
                TIMEOUT="20",
                MELISSA_TRAINER_SERVE_ENDPOINTS=server.endpoint or "",
            )
    finally:
        stop.set()
        thread.join()
    assert not marker.exists()  # nothing was unpickled
    assert sorted(map(tuple, bad)) == [
        (1, "bad_request"),
        (1, "bad_request"),
        (1, "bad_request"),
        (3, "bad_request"),
    ]
    counts = server.telemetry()
    assert counts["rejected_bad_magic"] == 2
    assert counts["rejected_truncated"] == 1 and counts["rejected_missing_frame"] == 1
    assert counts["rejected_bad_inputs"] == 1 and counts["rejected_bad_size"] == 1
    assert len(good["results"]) == 2 and good["caught"] == []
    lines = [r.getMessage() for r in caplog.records]
    assert sum("bad_magic" in line for line in lines) == 1  # the first in full, not each


SLOW = """
import os, sys
import numpy as np
import zmq
from melissa_trainer import wire as protocol

ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.RCVHWM, 1)
sock.setsockopt(zmq.RCVBUF, 4096)
sock.connect(os.environ["ENDPOINT"])
for i in range(int(os.environ["N"])):
    sock.send_multipart(protocol.encode_predict(1, i, 0, None, {"u": np.ones(4, np.float32)}))
print("sent", flush=True)
sys.stdin.read()  # reads no reply, until the test is done
"""


def test_a_client_that_reads_no_reply_blocks_nobody(server: PredictServer, tmp_path: Path) -> None:
    """A peer that sends requests and never reads the answers: its replies are dropped
    by the ROUTER when its queue is full; the server goes on answering another client."""
    server.serving = True
    stop = threading.Event()
    thread = drain(server, stop)
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    env = {**os.environ, "N": "3000", "ENDPOINT": server.endpoint or ""}
    slow = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    try:
        assert slow.stdout is not None and slow.stdout.readline().strip() == "sent"
        while server.telemetry().get("requests", 0) < 3000:  # all read by the server
            assert slow.poll() is None
            threading.Event().wait(0.01)
        out = run_client(
            PREDICTING,
            tmp_path,
            SIM="2",
            N="3",
            TIMEOUT="20",
            MELISSA_TRAINER_SERVE_ENDPOINTS=server.endpoint or "",
        )
    finally:
        stop.set()
        thread.join()
        slow.kill()
        slow.wait()
    assert out["caught"] == [] and len(out["results"]) == 3
    counts = server.telemetry()
    assert counts["requests"] == 3003
    assert counts["answered"] + counts.get("refused_busy", 0) == 3003


def test_a_request_older_than_its_timeout_is_dropped_unanswered(server: PredictServer) -> None:
    server.serving = True
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.connect(server.endpoint or "")
        u = np.ones(4, np.float32)
        sock.send_multipart(protocol.encode_predict(1, 1, 1, None, {"u": u}))  # 1 ms
        sock.send_multipart(protocol.encode_predict(1, 2, 0, None, {"u": u}))  # no timeout
        while server.pending() < 2:
            server.wait_pending(0.05)
        threading.Event().wait(0.01)  # the first is now older than its 1 ms
        (kept,) = server.take(8)
        assert kept.request.request_id == 2
        assert server.telemetry()["expired"] == 1
    finally:
        sock.close(linger=0)
        ctx.term()
