"""The stream's CurveZMQ keys protect the serving socket: the environment gives the serving
key with the endpoints, and without the server's key the error says so and names the fix.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_server import INPUTS, VERSION, drain

from melissa_trainer.client import Predictor
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_rendezvous import read_serving

pytestmark = pytest.mark.e2e  # its tests start processes (simulations, clients)


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
    # (the endpoints given: the trainer asked for its inputs first, DESCRIBE)
    assert srv.telemetry() == {"described": 1, "requests": 1, "answered": 1}


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
