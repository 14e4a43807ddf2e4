"""The C client's `mt_predict` to a trainer killed as its kernel accepted the request's
TCP connection (tests/client/test_predict_dying_trainer.py, the Python twin, says how a
user's trial met it): the connection is reset mid-handshake and every reconnection is
refused at the TCP connect. The request waited its whole timeout ("no connection to the
trainer's serving endpoint within T s"); it now fails at once, `MT_ETIMEDOUT`, "refused
the connection: nothing listens there", as against any dead trainer's port.

A raw listener that never accepts (its kernel does: the backlog), closed once the
client's TCP connection is established. The request is given `LONG` seconds, more than
the test's own timeout: failed before, the test timing out."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from predict_runs import CPredict
from predict_script import MT_ETIMEDOUT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))
from keys_receiver_process import established  # noqa: E402
from waiting import wait_until  # noqa: E402

pytestmark = pytest.mark.e2e  # the C client runs in a process of its own

LONG = 120  # (longer than the test's timeout: a request that waits for it fails the test)


@pytest.mark.timeout(60)
def test_a_trainer_killed_as_it_accepted_the_connection_fails_the_request_at_once(
    c_predict: CPredict,
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": f"tcp://127.0.0.1:{port}"}
    try:
        with c_predict.script(env) as script:
            asked = script.send(f"predict {LONG}")
            wait_until(lambda: established(port), "the client's TCP connection", 30)
            listener.close()  # the process gone: the backlog reset, the port refusing
            said = script.wait(asked)
        code, _, words = said[-1].partition(" ")
        assert int(code) == MT_ETIMEDOUT, said
        assert "refused the connection: nothing listens there" in words, said
    finally:
        listener.close()
