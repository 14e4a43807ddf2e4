"""What a `Predictor` says when its request gets no answer on a connection that is still
up, and when a CURVE key meets a serving socket without CURVE.

1. A request sent on a live connection and never answered (a trainer busy, or one whose
   process was stopped after the connection was up: a suspended Slurm job, a debugger)
   said "no prediction within T s (the trainer busy or gone)": a stopped trainer, which
   answers once continued, was not among the causes, and "gone" was wrong (a trainer
   whose process died closes the connection, which the monitor sees: the request fails at
   once). It names the endpoint now, and says what the monitor saw (`UNANSWERED`).
2. A key given for a serving socket without CURVE got the generic words ("the key given
   ... is not its public key, or it takes no CURVE") even when ZeroMQ's handshake
   failure carried the detail of a mechanism mismatch, which makes it certain: the
   socket is not encrypted, drop the key (`PLAIN_SERVE`).

The words are the C client's too (predict.c, predict_watch.c; compared here from the
source, no build). Each test but the source comparison failed before. Real sockets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq
from silent_peer import plain_zmtp_peer

from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.client.predict_errors import PLAIN_SERVE, SILENT, UNANSWERED

C_SOURCES = Path(__file__).resolve().parents[2] / "clients" / "c" / "src"
INPUTS = {"u": np.arange(4, dtype=np.float32)}
#: seconds of the unanswered request: ample for a connection on this host (a request
#: that found none in time would say so in other words, and fail the test)
TIMEOUT = 1.5


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)


def literals(name: str) -> str:
    """The C source `name` with its adjacent string literals joined, as the compiler
    joins them (across line ends and a macro's continuation backslashes)."""
    return re.sub(r'"(?:\s|\\\n)*"', "", (C_SOURCES / name).read_text())


#: each word, and the C source that says it
WORDS = {
    "UNANSWERED": (UNANSWERED, "predict.c"),
    "PLAIN_SERVE": (PLAIN_SERVE, "predict_watch.c"),
    "SILENT": (SILENT, "predict_watch.c"),
}


@pytest.mark.parametrize("name", sorted(WORDS))
def test_the_words_are_the_c_client_s(name: str) -> None:
    words, source = WORDS[name]
    assert words in literals(source), f"{name} is not in {source}: {words!r}"


@pytest.fixture
def mute() -> Iterator[tuple[zmq.Socket, str]]:
    """A ROUTER that takes requests and never answers (a trainer busy, or stopped once
    connected: its connection stays up), and its endpoint."""
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    try:
        yield router, router.getsockopt_string(zmq.LAST_ENDPOINT)
    finally:
        router.close(linger=0)
        context.term()


@pytest.mark.timeout(60)
def test_an_unanswered_request_says_its_connection_is_up_and_a_stopped_trainer(
    mute: tuple[zmq.Socket, str],
) -> None:
    router, endpoint = mute
    with Predictor(0, endpoint=endpoint) as predictor, pytest.raises(PredictTimeout) as error:
        predictor.predict(INPUTS, timeout=TIMEOUT)
    assert router.poll(0), "the request never reached the peer"  # (it was sent)
    said = str(error.value)
    assert said == (
        f"no prediction from the trainer's serving endpoint {endpoint} within {TIMEOUT} s: "
        f"{UNANSWERED}"
    ), said  # (before: "no prediction within 3.0 s (the trainer busy or gone)")
    assert "stopped (SIGSTOP, a suspended job: it answers once continued)" in said


@pytest.mark.timeout(120)
def test_a_key_given_to_a_plain_serving_socket_says_to_drop_it() -> None:
    """Against `plain_zmtp_peer` (a socket without CURVE that never closes first: the
    mismatch's detail every time, where a real one loses it under load), both requests
    get the certain words."""
    if not zmq.has("curve"):
        pytest.skip("pyzmq's libzmq was built without CURVE")
    key = zmq.curve_keypair()[0].decode("ascii")
    with plain_zmtp_peer() as endpoint:
        for _ in range(2):
            predictor = Predictor(0, endpoint=endpoint, curve_server_key=key)
            with predictor, pytest.raises(ValueError, match="refused this client's") as error:
                predictor.predict(INPUTS, timeout=60)
            # (before: "... is not its public key, or it takes no CURVE")
            assert str(error.value) == (
                f"the serving endpoint {endpoint} refused this client's CURVE handshake: "
                f"{PLAIN_SERVE}: drop the key given (curve_server_key or {ENV_SERVE_KEY}), "
                "or check the endpoint if that serving socket should use CURVE"
            ), str(error.value)
