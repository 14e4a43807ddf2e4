"""A `Predictor` whose serving peer accepts TCP and never answers the ZeroMQ greeting:
a program that is not a serving socket (``python -m http.server`` waits for a line),
or a serving trainer whose process is stopped (SIGSTOP, a suspended job: its kernel
accepts the connection, its libzmq is frozen). libzmq ends such a handshake after
``ZMQ_HANDSHAKE_IVL`` (30 s by default) with a failure WITHOUT a detail, which
`PredictLink.wait_connected` counted like a server's refusal: two of them, in a request
given more than two handshake intervals, raised ValueError "refused this client's
CURVE handshake: the key given ... is not its public key" (keyed) or "not a serving
socket, or CURVE only" (key-less): a mistake to fix, which a simulation does not fall
back from, for a trainer that answers once continued. The stream client had learnt the
rule (`client.handshake.NOT_ZMQ_AFTER`); the predict link follows it now: such a request
is a `PredictTimeout` (a fallback) that says what was seen, and a request after the
trainer is continued is answered.

Real sockets; the predictor's handshake interval is shortened to `IVL_MS` by a context
whose sockets set it (`Predictor(context=)`), so the tests take seconds. Each test
failed before (ValueError at the second interval's end)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import zmq
from silent_peer import silent  # noqa: F401 (a fixture)
from silent_predict import request_to_silent_peer, short_handshakes, silent_words
from stopped_process import stop

from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY

pytestmark = pytest.mark.e2e  # seconds of handshake intervals, a process stopped

#: the predictor's handshake interval here (ms), above `NOT_ZMQ_AFTER`
IVL_MS = 2500
#: a request's timeout: four handshake intervals (three end before it)
TIMEOUT = 4 * IVL_MS / 1000
INPUTS = {"u": np.arange(4, dtype=np.float32)}


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def context() -> Iterator[zmq.Context]:
    ctx = short_handshakes(IVL_MS)
    try:
        yield ctx
    finally:
        ctx.destroy(linger=0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_a_silent_peer_is_a_timeout_that_says_so_not_a_refusal(
    silent: tuple[str, list[socket.socket]],  # noqa: F811
    keyed: bool,
) -> None:
    request_to_silent_peer(silent, keyed, IVL_MS)


SERVER = """
import sys
import zmq
from melissa_trainer.stream.serving import PredictServer

keyed = sys.argv[1] == "keyed"
public, secret = zmq.curve_keypair()
server = PredictServer({"u": ((4,), "float32")}, curve=(secret, public) if keyed else None)
server.start()
server.serving = True
print(server.endpoint, public.decode() if keyed else "-", flush=True)
while True:
    if server.wait_pending(0.1):
        for p in server.take(8):
            server.answer(p, {"y": 2 * p.request.arrays["u"]}, 5)
"""


@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP")
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_a_stopped_serving_trainer_is_a_timeout_then_answers_once_continued(
    context: zmq.Context, keyed: bool
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, "keyed" if keyed else "plain"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        endpoint, key = proc.stdout.readline().split()
        stop(proc.pid)  # (before the predictor connects: no handshake)
        with Predictor(
            0, endpoint=endpoint, curve_server_key=key if keyed else None, context=context
        ) as predictor:
            with pytest.raises(PredictTimeout) as error:  # (before: ValueError)
                predictor.predict(INPUTS, timeout=TIMEOUT)
            said = str(error.value)
            assert said == silent_words(endpoint, TIMEOUT), said
            os.kill(proc.pid, signal.SIGCONT)
            outputs, version = predictor.predict(INPUTS, timeout=30)
            assert version == 5 and outputs["y"].tolist() == [0, 2, 4, 6]
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.communicate(timeout=60)
