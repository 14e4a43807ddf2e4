"""A trainer stopped (SIGSTOP) while a `Predictor` asks with a short timeout (htrial27,
/tmp/htrial27/j_sigstop.sh, 0.5 s): the first request, on the connection that was up,
said "its connection is still up ... SIGSTOP" (`UNANSWERED`); that failure closes the
socket, and each next request, on a new connection the stopped trainer's kernel
accepted and its libzmq never greeted, said "no connection to the trainer's serving
endpoint within 0.5 s (the trainer is gone or restarting)": the "silent peer" words
(`SILENT`) needed the connection to be `timeout_bound` (2 s) old, which a 0.5 s timeout
never lets it be. The link remembers now that the endpoint went silent, across the
reset, until it answers.

Deterministic, no process stopped: a ROUTER that takes the request and never answers
(the trainer stopped once connected), then, on the same port, a listener that accepts
TCP and never speaks (`silent_on_port`: the stopped trainer's kernel). The second and
third requests failed before (the "gone or restarting" words). The C client: the same
(tests/c/test_c_predict_silent_after_unanswered.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import zmq
from silent_peer import silent_on_port

from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.client.predict_errors import SILENT, UNANSWERED

INPUTS = {"u": np.arange(4, dtype=np.float32)}
#: the unanswered request's seconds: ample for a connection on this host
FIRST = 3.0
#: the next requests' seconds: under the 2 s `timeout_bound`, as the trial's 0.5 s
SHORT = 1.0


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)


def silent_words(endpoint: str, timeout: float) -> str:
    """What a request says of a peer that accepted TCP and never greeted."""
    return (
        f"the trainer's serving endpoint {endpoint} accepted a TCP connection but no ZeroMQ "
        f"handshake completed within {timeout} s: {SILENT}"
    )


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
@pytest.mark.timeout(120)
def test_a_stopped_trainer_is_said_silent_at_every_short_request() -> None:
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
    try:
        with Predictor(0, endpoint=endpoint) as predictor:
            with pytest.raises(PredictTimeout) as first:
                predictor.predict(INPUTS, timeout=FIRST)
            assert router.poll(0), "the request never reached the peer"
            assert str(first.value).endswith(UNANSWERED), str(first.value)
            router.close(linger=0)
            said = []
            with silent_on_port(int(endpoint.rpartition(":")[2])) as accepted:
                for _ in range(2):
                    with pytest.raises(PredictTimeout) as later:
                        predictor.predict(INPUTS, timeout=SHORT)
                    said.append(str(later.value))
                assert accepted, "the silent listener accepted no connection"
        # (before: "no connection to the trainer's serving endpoint within 1.0 s (the
        # trainer is gone or restarting)", both)
        assert said == [silent_words(endpoint, SHORT)] * 2, said
    finally:
        router.close(linger=0)
        context.term()
