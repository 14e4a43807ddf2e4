"""The serving channel with real sockets and real client processes (issue 47): a
`PredictServer` in this process (or in a server process, to kill -9), drained by a
stand-in for the model (``y = 2 u + version``: an oracle the test computes itself), and
clients in processes of their own: a `Predictor` or a raw DEALER writing frames by hand.

What is held: a round trip returns the arrays and the version; a flood is refused
beyond `max_queue` and the queue never holds more; malformed requests are rejected,
counted and logged, nothing is unpickled, and the others are still served; a request
before serving (no serve file: timeout; bound but not serving: refusal) and to a
trainer gone (kill -9) raise the catchable errors, and a restarted server is found
again.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq
from helpers import run_group
from predict_server import INPUTS, VERSION, drain

from melissa_trainer import wire as protocol
from melissa_trainer.client import Predictor, PredictRefused, PredictTimeout
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_rendezvous import read_serving

pytestmark = pytest.mark.e2e  # its tests start processes (simulations, clients)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PredictServer]:
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path / "rv", run_id="run-a", max_queue=4)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def run_client(code: str, tmp_path: Path, timeout: float = 60.0, **env: str) -> dict:
    """Run `code` in a fresh interpreter (a simulation); it prints one JSON line."""
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(code))
    environment = {**os.environ, **env}
    done = run_group([sys.executable, str(script)], timeout=timeout, env=environment)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


PREDICTING = """
import json, os, sys
import numpy as np
from melissa_trainer.client import Predictor, PredictionUnavailable, PredictRefused, PredictTimeout

caught = []
results = []
with Predictor(int(os.environ["SIM"]), run_id=os.environ.get("RUN")) as p:
    for i in range(int(os.environ["N"])):
        u = np.arange(4, dtype=np.float32) + i
        try:
            out, version = p.predict({"u": u}, timeout=float(os.environ["TIMEOUT"]))
            results.append({"u": u.tolist(), "y": out["y"].tolist(), "version": version})
        except PredictRefused as exc:
            caught.append(["refused", exc.reason])
        except PredictTimeout as exc:
            caught.append(["timeout", str(exc)])
print(json.dumps({"results": results, "caught": caught}))
"""


def test_round_trip_from_a_client_process(server: PredictServer, tmp_path: Path) -> None:
    server.serving = True
    stop = threading.Event()
    thread = drain(server, stop)
    try:
        out = run_client(
            PREDICTING,
            tmp_path,
            SIM="3",
            RUN="run-a",
            N="5",
            TIMEOUT="20",
            MELISSA_TRAINER_RENDEZVOUS=str(tmp_path / "rv"),
        )
    finally:
        stop.set()
        thread.join()
    assert out["caught"] == []
    assert len(out["results"]) == 5
    for r in out["results"]:
        assert r["version"] == VERSION
        np.testing.assert_array_equal(r["y"], 2 * np.array(r["u"], np.float32) + VERSION)
    assert server.telemetry() == {"requests": 5, "answered": 5}


def test_before_serving_timeout_then_refusal(tmp_path: Path) -> None:
    """No serve file yet: a timeout, caught; bound but not serving: ``not_serving``."""
    env = {"SIM": "0", "N": "1", "TIMEOUT": "0.3", "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
    out = run_client(PREDICTING, tmp_path, **env)
    assert out["results"] == [] and out["caught"][0][0] == "timeout"
    assert "no trainer serves" in out["caught"][0][1]
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path)
    srv.start()
    try:
        out = run_client(PREDICTING, tmp_path, **{**env, "TIMEOUT": "20"})
    finally:
        srv.stop()
    assert out == {"results": [], "caught": [["refused", "not_serving"]]}
    assert not (tmp_path / "serve_0.json").exists()  # removed when it stopped


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


SERVER = """
import os, sys, threading
import numpy as np
from melissa_trainer.stream.serving import PredictServer

srv = PredictServer({"u": ((4,), "float32")}, rendezvous_dir=os.environ["RV"])
srv.start()
srv.serving = True
print(srv.endpoint, flush=True)
version = int(os.environ["VERSION"])
while True:
    if srv.wait_pending(0.1):
        for p in srv.take(8):
            srv.answer(p, {"y": 2 * p.request.arrays["u"] + version}, version)
"""


def start_server(tmp_path: Path, version: int) -> tuple[subprocess.Popen[str], str]:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = {**os.environ, "RV": str(tmp_path / "rv"), "VERSION": str(version)}
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_trainer_gone_then_restarted(tmp_path: Path) -> None:
    """kill -9 of the serving process: the next request times out (caught, and its
    stale file does not hang the client); a restarted server, on another port, is
    found again."""
    first, endpoint = start_server(tmp_path, 1)
    second = None
    try:
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as p:
            u = np.ones(4, np.float32)
            assert p.predict({"u": u}, timeout=20).version == 1
            first.send_signal(signal.SIGKILL)
            first.wait()
            with pytest.raises(PredictTimeout):
                p.predict({"u": u}, timeout=0.5)
            entry, _ = read_serving(tmp_path / "rv", 0, None)
            assert entry is not None and entry["endpoint"] == endpoint  # stale, left
            with pytest.raises(PredictTimeout):
                p.predict({"u": u}, timeout=0.5)  # looked up again: the stale one
            second, endpoint2 = start_server(tmp_path, 2)
            assert endpoint2 != endpoint
            out, version = p.predict({"u": u}, timeout=20)
            assert version == 2
            np.testing.assert_array_equal(out["y"], 2 * u + 2)
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()
                proc.wait()


def test_wrong_run_and_inputs_checked_before_sending(server: PredictServer, tmp_path: Path) -> None:
    server.serving = True
    with (
        Predictor(0, endpoint=server.endpoint, run_id="run-b") as p,
        pytest.raises(PredictRefused) as refused,
    ):
        p.predict({"u": np.ones(4, np.float32)}, timeout=20)
    assert refused.value.reason == "wrong_run"
    with (
        Predictor(0, rendezvous_dir=tmp_path / "rv", run_id="run-a") as p,
        pytest.raises(ValueError, match="declared <f4 \\(4,\\)"),
    ):
        p.predict({"u": np.ones(4, np.float64)}, timeout=20)
    # a client of another run does not take this run's file for its own
    entry, why = read_serving(tmp_path / "rv", 0, "run-b")
    assert entry is None and "another run" in why


def test_protocol_round_trip_and_rules() -> None:
    arrays = {"u": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.array(5, np.int64)}
    frames = [bytes(f) for f in protocol.encode_predict(7, 3, 250, "r1", arrays)]
    req = protocol.decode_predict(frames, 1 << 20)
    assert (req.simulation_id, req.request_id, req.timeout_ms, req.run_id) == (7, 3, 250, "r1")
    np.testing.assert_array_equal(req.arrays["u"], arrays["u"])
    assert req.arrays["s"].shape == () and int(req.arrays["s"]) == 5
    assert not req.arrays["u"].flags.writeable  # a view of the frame
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode_predict(frames, 30)
    assert err.value.reason == "too_large"
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode_predict([frames[0], frames[1]], 1 << 20)
    assert err.value.reason == "missing_frame"
    zero = protocol.encode_predict(7, 3, 0, None, {"u": np.ones(1, np.float32)})[0]
    header = bytearray(zero)
    header[protocol.PREFIX.size + 12] = 0  # the array count
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode_predict([bytes(header)], 1 << 20)
    assert err.value.reason == "bad_request"
    reply = protocol.decode_reply([protocol.encode_refused(7, 3, 9, "busy", "full", 100)], 10)
    assert isinstance(reply, protocol.Refusal)
    assert (reply.reason, reply.retry_after_ms, reply.version) == ("busy", 100, 9)


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


def test_mutated_requests_raise_only_protocol_errors() -> None:
    """5,000 mutations of a valid request (a byte changed, a frame cut, dropped or
    added): each decodes or raises `ProtocolError`, nothing else escapes."""
    rng = np.random.default_rng(0)
    arrays = {"u": np.ones(4, np.float32), "v": np.zeros((2, 3), np.int64)}
    base = [bytes(f) for f in protocol.encode_predict(3, 9, 100, "run-x", arrays)]
    outcomes = set()
    for _ in range(5000):
        frames = [bytearray(f) for f in base]
        which = int(rng.integers(len(frames)))
        kind = int(rng.integers(4))
        if kind == 0:
            frames[which][int(rng.integers(len(frames[which])))] = int(rng.integers(256))
        elif kind == 1:
            del frames[which][int(rng.integers(len(frames[which]) + 1)) :]
        elif kind == 2:
            frames.pop(which)
        else:
            frames.append(bytearray(rng.bytes(int(rng.integers(40)))))
        try:
            protocol.decode_predict([bytes(f) for f in frames], 1 << 20)
            outcomes.add("ok")
        except protocol.ProtocolError as exc:
            outcomes.add(exc.reason)
    assert {"ok", "bad_size", "missing_frame", "unexpected_frame", "truncated"} <= outcomes


@pytest.mark.skipif(not zmq.has("curve"), reason="this libzmq was built without CURVE")
def test_curve_keys_of_the_stream_protect_the_serving_socket(tmp_path: Path) -> None:
    """With the receiver's CURVE keys, the serve file carries the public key: a client
    reading it is answered; one without the key gets no answer (a timeout, caught)."""
    public, secret = zmq.curve_keypair()
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path, curve=(secret, public))
    srv.start()
    srv.serving = True
    stop = threading.Event()
    thread = drain(srv, stop)
    try:
        entry, _ = read_serving(tmp_path, 0, None)
        assert entry is not None and entry["curve_public_key"] == public.decode()
        with Predictor(0, rendezvous_dir=tmp_path) as p:
            assert p.predict({"u": np.ones(4, np.float32)}, timeout=20).version == VERSION
    finally:
        stop.set()
        thread.join()
        srv.stop()
    assert srv.telemetry() == {"requests": 1, "answered": 1}


@pytest.mark.skipif(not zmq.has("curve"), reason="this libzmq was built without CURVE")
def test_the_environment_gives_the_serving_key_with_the_endpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Endpoints from the environment (`$MELISSA_TRAINER_SERVE_ENDPOINTS`, no rendezvous)
    come with the servers' CURVE key the same way (`$MELISSA_TRAINER_SERVE_KEY`): a
    simulation's `Client.predict`, which cannot pass a key, is answered."""
    public, secret = zmq.curve_keypair()
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path, curve=(secret, public))
    srv.start()
    srv.serving = True
    stop = threading.Event()
    thread = drain(srv, stop)
    monkeypatch.delenv("MELISSA_TRAINER_RENDEZVOUS", raising=False)
    monkeypatch.setenv("MELISSA_TRAINER_SERVE_ENDPOINTS", srv.endpoint or "")
    monkeypatch.setenv("MELISSA_TRAINER_SERVE_KEY", public.decode())
    try:
        with Predictor(3) as p:
            assert p.predict({"u": np.ones(4, np.float32)}, timeout=20).version == VERSION
        monkeypatch.setenv("MELISSA_TRAINER_SERVE_KEY", "not-a-key")
        with Predictor(3) as p, pytest.raises(ValueError, match="MELISSA_TRAINER_SERVE_KEY"):
            p.predict({"u": np.ones(4, np.float32)}, timeout=20)
    finally:
        stop.set()
        thread.join()
        srv.stop()
    assert srv.telemetry() == {"requests": 1, "answered": 1}


@pytest.mark.skipif(not zmq.has("curve"), reason="this libzmq was built without CURVE")
@pytest.mark.parametrize("key", ["none", "another"])
def test_without_the_servers_key_the_error_says_so_and_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """A client without the server's CURVE key (none, or another server's) is told so at
    its handshake, a mistake to fix (ValueError): not a timeout after its whole wait that
    blames a trainer gone, on every request it would then fall back from."""
    public, secret = zmq.curve_keypair()
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path, curve=(secret, public))
    srv.start()
    srv.serving = True
    monkeypatch.delenv("MELISSA_TRAINER_SERVE_KEY", raising=False)
    given = None if key == "none" else zmq.curve_keypair()[0].decode()
    try:
        with (
            Predictor(0, endpoint=srv.endpoint, curve_server_key=given) as p,
            pytest.raises(ValueError) as caught,
        ):
            p.predict({"u": np.ones(4, np.float32)}, timeout=60)
        message = str(caught.value)
        assert srv.endpoint in message and "CURVE" in message
        assert "curve_server_key" in message and "MELISSA_TRAINER_RENDEZVOUS" in message
    finally:
        srv.stop()
    assert srv.telemetry().get("requests", 0) == 0  # nothing reached the server


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
    from melissa_trainer.stream.serving import Pending

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


def test_a_request_larger_than_the_inputs_is_refused_naming_the_array(
    server: PredictServer,
) -> None:
    """numpy's default float64 for a float32 input (the commonest mistake of a client
    that does not know the inputs: one given `endpoint=` or
    `$MELISSA_TRAINER_SERVE_ENDPOINTS`) is larger than the declared inputs: the
    refusal names the array, its dtype and shape, and what the trainer serves (it said
    only "arrays of more than 16 bytes"), the dtype first."""
    server.serving = True
    with (
        Predictor(0, endpoint=server.endpoint) as p,
        pytest.raises(ValueError, match="the trainer refused the inputs") as refused,
    ):
        p.predict({"u": np.ones(4)}, timeout=20)
    # (the dtype first, and the fix: a cast; htrial7 F9)
    assert "too_large: input 'u' is <f8 (4,), declared <f4 (4,) (cast it to <f4)" in str(
        refused.value
    )


@pytest.mark.parametrize("inputs", [{"u": np.ones(3, np.float32)}, {"v": np.ones(4, np.float32)}])
def test_inputs_the_trainer_refuses_are_a_value_error_without_a_rendezvous(
    server: PredictServer, inputs: dict[str, np.ndarray]
) -> None:
    """Without a rendezvous the client cannot check the inputs; the trainer's refusal
    is the `ValueError` a rendezvous gives before sending, not a `PredictRefused` that a
    simulation falling back on `PredictionUnavailable` would swallow on every request
    (it fell back silently, forever, for a wrong shape or name)."""
    server.serving = True
    stop = threading.Event()
    thread = drain(server, stop)
    try:
        with Predictor(0, endpoint=server.endpoint) as p:
            with pytest.raises(ValueError, match="the trainer refused the inputs: bad_inputs:"):
                p.predict(inputs, timeout=20)
            out, version = p.predict({"u": np.ones(4, np.float32)}, timeout=20)  # then as usual
    finally:
        stop.set()
        thread.join(10)
    assert version == VERSION and out["y"].tolist() == [2.0 + VERSION] * 4


def test_an_extra_input_is_named_not_refused_as_too_large(server: PredictServer) -> None:
    """A request with an array the trainer does not serve (as a C client or a raw
    socket sends it: the Python client checks a serve file's inputs first) is refused
    naming that array; before, the decoder's byte bound read it "too_large". A float64
    array for a float32 input stays "too_large", the dtype named first."""
    server.serving = True
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    u = np.ones(4, np.float32)

    def ask(request_id: int, arrays: dict[str, np.ndarray]) -> protocol.Refusal:
        sock.send_multipart(protocol.encode_predict(2, request_id, 0, None, arrays))
        assert sock.poll(20_000), "no answer"
        reply = protocol.decode_reply([f.buffer for f in sock.recv_multipart(copy=False)], 1000)
        assert isinstance(reply, protocol.Refusal) and reply.request_id == request_id
        return reply

    try:
        sock.connect(server.endpoint or "")
        extra = ask(1, {"u": u, "extra": np.ones(2, np.float32)})
        assert extra.reason == "bad_request"
        assert extra.detail == (
            "bad_inputs: arrays ['extra', 'u'], the trainer serves inputs ['u'] (unknown: 'extra')"
        )
        wide = ask(2, {"u": np.ones(4, np.float64)})
        assert wide.detail.startswith("too_large: input 'u' is <f8 (4,), declared <f4 (4,)")
        counts = server.telemetry()
        assert (counts["rejected_bad_inputs"], counts["rejected_too_large"]) == (1, 1)
    finally:
        sock.close(linger=0)
        ctx.term()
