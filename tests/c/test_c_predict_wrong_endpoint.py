"""The C client's `mt_predict` given an endpoint that answers but is not a serving
socket (the stream receiver's ``endpoint`` of ``rendezvous/rank_0.json`` instead of
``serve_0.json``'s), or one whose host name does not resolve: as the Python client's
`Predictor` (tests/client/test_predict_wrong_endpoint.py, test_predict_dns.py, user
trial htrial7 F3, F4), the request fails at once with `MT_EENV` (a mistake to fix, not
a status to fall back from), the message naming the endpoint and the fix.

Before the fix the first waited its whole timeout at every request and said "no
connection to the trainer's serving endpoint within ... s (the trainer is gone or
restarting)" while the trainer was alive; the second said "refused the connection:
nothing listens there". A serve file naming such a socket (a stale one whose port
another socket took since) is a trainer gone: `MT_ETIMEDOUT`, at once.

Real sockets: a real `Receiver` (its PULL socket), the C client `mt_script`. Every
request is given `LONG` seconds, more than the test's own timeout: a request that waits
for it fails the test.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import zmq
from helpers import running
from predict_runs import CPredict
from predict_script import MT_EENV, MT_ETIMEDOUT

from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.e2e  # every test here starts a process

#: longer than the tests' own timeouts: a request that waits for it fails the test
LONG = 120


class Warnings(logging.Handler):
    """The receiver logger's WARNING messages (whatever its propagation)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.timeout(60)
def test_the_receivers_endpoint_is_an_error_at_once_naming_the_fix(c_predict: CPredict) -> None:
    """...and the receiver warns of it once (`stream.connections`: closed in its
    handshake), naming the serve file: it said nothing before."""
    log, warnings = logging.getLogger("melissa_trainer.stream.receiver"), Warnings()
    log.addHandler(warnings)
    try:
        with running(expected_simulations=1) as receiver:
            assert receiver.endpoint is not None
            env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": receiver.endpoint}
            results = c_predict.statuses(env, LONG, LONG, LONG)
    finally:
        log.removeHandler(warnings)
    (warning,) = [w for w in warnings.lines if "closed in its ZeroMQ handshake" in w]
    assert receiver.endpoint in warning and "serve_N.json" in warning, warning
    for code, message in results:
        # (before the fix: LONG seconds, past the test's timeout, then MT_ETIMEDOUT)
        assert code == MT_EENV, message
        # ZeroMQ's two ways of saying it race: the connection closed at the handshake
        # and never dialled again ("answers but is not a serving socket"), or the
        # receiver closed it first twice, as a CURVE server does to a client without a
        # key (the message of a refused handshake, which names both causes)
        assert message.startswith("mt_predict: the "), message
        assert receiver.endpoint in message and "is not a serving socket" in message, message
        assert "`endpoint` of serve_0.json in the rendezvous directory" in message, message
        assert "MELISSA_TRAINER_RENDEZVOUS" in message, message
        assert "at an earlier request" not in message  # (no backoff: a mistake to fix)


@pytest.mark.timeout(60)
def test_a_serve_file_naming_a_receiver_falls_back_at_once(
    c_predict: CPredict, tmp_path: Path
) -> None:
    with running(expected_simulations=1) as receiver:
        assert receiver.endpoint is not None
        rv = tmp_path / "rv"
        specs = field_specs({"u": ((4,), "float32")})
        write_serving(rv, 0, 1, receiver.endpoint, specs, None, None)
        results = c_predict.statuses({"MELISSA_TRAINER_RENDEZVOUS": str(rv)}, LONG)
    code, message = results[0]
    assert code == MT_ETIMEDOUT, message
    assert message.startswith(
        f"the serving endpoint {receiver.endpoint} of serve_0.json "
        "answers but is not a serving socket"
    ), message


@pytest.mark.timeout(60)
def test_a_curve_receivers_endpoint_with_its_key_names_the_serve_file_too(
    c_predict: CPredict,
) -> None:
    """With CURVE, ZeroMQ reports the closed handshake as a refusal without detail, the
    same as a wrong key: the error says both."""
    if not zmq.has("curve"):
        pytest.skip("pyzmq's libzmq was built without CURVE")
    with running(curve_secret_key=zmq.curve_keypair()[1], expected_simulations=1) as receiver:
        assert receiver.endpoint is not None and receiver.curve_public_key is not None
        env = {
            "MELISSA_TRAINER_SERVE_ENDPOINTS": receiver.endpoint,
            "MELISSA_TRAINER_SERVE_KEY": receiver.curve_public_key,
        }
        results = c_predict.statuses(env, LONG)
    code, message = results[0]
    if "built without" in message:
        pytest.skip(f"the C client's libzmq: {message}")
    assert code == MT_EENV, message
    assert message.startswith(f"mt_predict: the serving endpoint {receiver.endpoint} refused")
    said = "or it is not a serving socket: the serving endpoint is the `endpoint` of serve_0.json"
    assert said in message, message


@pytest.mark.timeout(60)
def test_a_host_name_that_does_not_resolve_is_an_error_naming_it(c_predict: CPredict) -> None:
    endpoint = "tcp://no-such-host.invalid:5000"  # (.invalid never resolves: RFC 6761)
    results = c_predict.statuses({"MELISSA_TRAINER_SERVE_ENDPOINTS": endpoint}, LONG, LONG)
    for code, message in results:
        # (before the fix: MT_ETIMEDOUT, "refused the connection: nothing listens there")
        assert code == MT_EENV, message
        assert message.startswith(
            f"mt_predict: the serving endpoint {endpoint}: the host "
            "name 'no-such-host.invalid' does not resolve"
        ), message
        assert "MELISSA_TRAINER_SERVE_ENDPOINTS" in message, message
