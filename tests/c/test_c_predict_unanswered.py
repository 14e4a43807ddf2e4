"""The C client's `mt_predict` words, as the Python client's
(tests/client/test_predict_unanswered_words.py: the oracle, run against the same server):

1. A trainer stopped (SIGSTOP: a suspended Slurm job, a debugger) after the request's
   connection was up: the request's MT_ETIMEDOUT said "no prediction within T s (the
   trainer busy or gone)"; it names the endpoint now and says what the monitor saw (the
   connection still up: busy, stopped, or its node unreachable; `UNANSWERED`), word for
   word as the Python client; once continued, the trainer answers.
2. A key given (MELISSA_TRAINER_SERVE_KEY) for a serving socket without CURVE, refused
   with ZeroMQ's detail of a mechanism mismatch: MT_EENV saying the socket is not
   encrypted and to drop the key (`PLAIN_SERVE`), not the generic "the key given ... is
   not its public key, or it takes no CURVE".

Both failed before (the old words). Real processes and sockets: the C client is
`mt_script`, the server a `PredictServer` in a process of its own; for the second, a
socket without CURVE whose refusal always carries the mismatch's detail
(`predict_runs.plain_zmtp_peer`: a `PredictServer`'s loses it to a race now and then,
and the test asked 5 times hoping one kept it; the real server's refusal, either way:
test_c_predict_curve_refused.py)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_runs import CPredict
from predict_script import MT_EENV, MT_ETIMEDOUT, outputs_of, status
from server_process import kill_all, start_server
from silent_peer import plain_zmtp_peer
from stopped_process import stop

from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.client.predict_errors import PLAIN_SERVE, UNANSWERED

pytestmark = pytest.mark.e2e  # every test here starts a process

#: the unanswered request's seconds (a connection is up already: no wait for one)
TIMEOUT = 1.5


@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP")
def test_a_trainer_stopped_once_connected_is_said_stopped_as_the_python_client(
    c_predict: CPredict, tmp_path: Path
) -> None:
    proc, endpoint = start_server(tmp_path, 3, hold=False)
    predictor = Predictor(0, rendezvous_dir=tmp_path / "rv")
    inputs = {"u": np.ones(4, np.float32)}
    try:
        with c_predict.script({"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}, 0) as script:
            first = script.send("predict 30")
            script.wait(first)
            assert predictor.predict(inputs, timeout=30).version == 3  # (both connected)
            stop(proc.pid)
            unanswered = script.send(f"predict {TIMEOUT}")
            script.wait(unanswered)
            with pytest.raises(PredictTimeout) as python_error:
                predictor.predict(inputs, timeout=TIMEOUT)
            os.kill(proc.pid, signal.SIGCONT)
            again = script.send("predict 30")
            lines, _ = script.finish(timeout=60)
        assert predictor.predict(inputs, timeout=30).version == 3  # (continued: answers)
    finally:
        predictor.close()
        os.kill(proc.pid, signal.SIGCONT)
        kill_all(proc)
    assert status(lines, first)[0] == 0 and outputs_of(lines, first)[0] == 3
    said = (
        f"no prediction from the trainer's serving endpoint {endpoint} within {TIMEOUT} s: "
        f"{UNANSWERED}"
    )
    # (before: "no prediction within 1.5 s (the trainer busy or gone)", in both)
    assert status(lines, unanswered) == (MT_ETIMEDOUT, said), lines[unanswered]
    assert str(python_error.value) == said
    assert status(lines, again)[0] == 0 and outputs_of(lines, again)[0] == 3


@pytest.mark.timeout(120)
def test_a_key_given_to_a_plain_serving_socket_says_to_drop_it(c_predict: CPredict) -> None:
    """Each request on a new socket (the one before was refused): each refusal has the
    mismatch's detail (`plain_zmtp_peer`), and each says to drop the key."""
    if not zmq.has("curve"):
        pytest.skip("pyzmq's libzmq was built without CURVE")
    with plain_zmtp_peer() as endpoint:
        env = {
            "MELISSA_TRAINER_SERVE_ENDPOINTS": endpoint,
            "MELISSA_TRAINER_SERVE_KEY": zmq.curve_keypair()[0].decode("ascii"),
        }
        results = c_predict.statuses(env, 60, 60)
    if any("built without" in message for _, message in results):
        pytest.skip(f"the C client's libzmq: {results}")
    said = (
        f"mt_predict: the serving endpoint {endpoint} refused this client's CURVE "
        f"handshake: {PLAIN_SERVE}: drop the key given (MELISSA_TRAINER_SERVE_KEY), or "
        "check the endpoint if that serving socket should use CURVE"
    )
    assert results == [(MT_EENV, said)] * 2, results  # (before: "... or it takes no CURVE")
