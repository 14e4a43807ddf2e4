"""The serving channel with real sockets and real client processes (issue 47): a
`PredictServer` in this process (or in a server process, to kill -9), drained by a
stand-in for the model (``y = 2 u + version``: an oracle the test computes itself), and
clients in processes of their own.

What is held: a round trip returns the arrays and the version; a request before serving
(no serve file: timeout; bound but not serving: refusal) and to a trainer gone (kill -9)
raise the catchable errors, and a restarted server is found again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from predict_server import INPUTS, VERSION, drain
from serving_runs import PREDICTING, run_client

from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_rendezvous import read_serving

pytestmark = pytest.mark.e2e  # its tests start processes (simulations, clients)


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
            with pytest.raises(
                PredictTimeout, match="refused the connection: nothing listens there"
            ):
                p.predict({"u": u}, timeout=0.5)
            entry, _ = read_serving(tmp_path / "rv", 0, None)
            assert entry is not None and entry["endpoint"] == endpoint  # stale, left
            with pytest.raises(
                PredictTimeout, match="refused the connection: nothing listens there"
            ):
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
