"""The C client's `mt_predict` against a trainer stopped (SIGSTOP) while it asks with a
short timeout, as the Python client (tests/client/test_predict_silent_after_unanswered.py,
the oracle: the same words): the first request, on the connection that was up, says
`UNANSWERED`; each next one, on a new connection that the stopped trainer's kernel
accepts and its libzmq never greets, said "no connection to the trainer's serving
endpoint within 1.0 s (the trainer is gone or restarting)" (the silent words needed the
connection `timeout_bound`, 2 s, old) and says `SILENT` now: predict_watch.c remembers
that the endpoint went silent (`predict_silent_at`) across the socket's release.

Deterministic, no process stopped: a ROUTER that never answers, then a listener on its
port that never speaks (`silent_on_port`). Failed before (the "gone or restarting" words,
twice)."""

from __future__ import annotations

import pytest
import zmq
from predict_runs import CPredict
from predict_script import MT_ETIMEDOUT, status
from silent_peer import silent_on_port

from melissa_trainer.client.predict_errors import SILENT, UNANSWERED

pytestmark = pytest.mark.e2e  # a compiled driver

#: the unanswered request's seconds; the next requests' (under the 2 s bound)
FIRST, SHORT = 3.0, 1.0


@pytest.mark.timeout(180)
def test_a_stopped_trainer_is_said_silent_at_every_short_request(c_predict: CPredict) -> None:
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
    try:
        env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": endpoint}
        with c_predict.script(env, 0) as script:
            first = script.send(f"predict {FIRST}")
            script.wait(first)
            assert router.poll(0), "the request never reached the peer"
            router.close(linger=0)
            with silent_on_port(int(endpoint.rpartition(":")[2])) as accepted:
                later = [script.send(f"predict {SHORT}") for _ in range(2)]
                lines, _ = script.finish(timeout=60)
                assert accepted, "the silent listener accepted no connection"
    finally:
        router.close(linger=0)
        context.term()
    said = (
        f"the trainer's serving endpoint {endpoint} accepted a TCP connection but no ZeroMQ "
        f"handshake completed within {SHORT} s: {SILENT}"
    )
    assert status(lines, first)[0] == MT_ETIMEDOUT
    assert status(lines, first)[1].endswith(UNANSWERED), lines[first]
    # (before: "no connection to the trainer's serving endpoint within 1.0 s (the trainer is
    # gone or restarting)", both)
    assert [status(lines, n) for n in later] == [(MT_ETIMEDOUT, said)] * 2, lines
