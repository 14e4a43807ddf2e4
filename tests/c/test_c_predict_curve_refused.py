"""The C client's `mt_predict` against a server that refuses its handshake: a CURVE key
that is not the server's, none for a CURVE server, one for a server without CURVE.
As the Python client's `Predictor` (which raises ValueError at once: the oracle here,
run against the same server), the request fails as soon as the refusal is certain,
with `MT_EENV` (a mistake to fix, not a status to fall back from) and a message naming
the endpoint, the key's source and the fix.

Before the fix each such request waited its whole timeout and returned `MT_ETIMEDOUT`,
which a solver takes for a trainer busy or gone: it fell back at every step, silently.
Every request here is given `LONG` seconds, more than the test's own timeout: a request
that waits for it fails the test.

A key read from a serve file is another case, as in the Python client: a failure
without detail may be a stale file's key (a restarted trainer publishes a new one,
which the lookup after the timeout reads), so that request waits its timeout; only a
mechanism mismatch (the serve file says CURVE, the server has none) is certain at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_runs import CPredict
from predict_script import MT_EENV, MT_ETIMEDOUT
from predict_server import answering_server

from melissa_trainer.client.predict import Predictor
from melissa_trainer.client.predict_errors import TOO_SHORT

pytestmark = pytest.mark.e2e  # every test here starts a process

#: longer than the tests' own timeouts: a request that waits for it fails the test
LONG = 120
FIX = "set MELISSA_TRAINER_SERVE_KEY to the stream's ReceiverConfig.curve_public_key"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("server_curve", "client_key", "said"),
    [
        (True, "another", "the key given (MELISSA_TRAINER_SERVE_KEY) is not its public key"),
        (True, None, "it takes CURVE (encrypted) connections only, and no CURVE key is known"),
        # (with ZeroMQ's mismatch detail: test_c_predict_unanswered.py; this one's words
        # when the detail was lost, under load, or with it)
        (False, "another", "MELISSA_TRAINER_SERVE_KEY)"),
    ],
    ids=["wrong_key", "no_key_for_curve_server", "key_for_plain_server"],
)
def test_a_refused_handshake_fails_the_request_at_once_naming_the_key(
    c_predict: CPredict,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server_curve: bool,
    client_key: str | None,
    said: str,
) -> None:
    if not zmq.has("curve"):
        pytest.skip("pyzmq's libzmq was built without CURVE")
    with answering_server(tmp_path, curve=server_curve) as (server, _):
        assert server.endpoint is not None
        env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": server.endpoint}
        if client_key is not None:
            env["MELISSA_TRAINER_SERVE_KEY"] = zmq.curve_keypair()[0].decode("ascii")
        results = c_predict.statuses(env, LONG, LONG)
        # the oracle: the Python client, same server and variables, raises at once
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        predictor = Predictor(simulation_id=7)
        try:
            with pytest.raises(ValueError, match="refused this client's") as python_error:
                predictor.predict({"u": np.arange(4, dtype=np.float32)}, timeout=LONG)
        finally:
            predictor.close()
        requests = server.telemetry().get("requests", 0)
    if any("built without" in message for _, message in results):
        pytest.skip(f"the C client's libzmq: {results}")
    assert server.endpoint in str(python_error.value)
    for code, message in results:
        # (before the fix: LONG seconds, past the test's timeout, then MT_ETIMEDOUT)
        assert code == MT_EENV, message
        assert message.startswith(f"mt_predict: the serving endpoint {server.endpoint} refused")
        plain = "drop the key given (MELISSA_TRAINER_SERVE_KEY)" in message  # (the detail)
        assert said in message and (plain or FIX in message), message
        assert "at an earlier request" not in message  # (no backoff: the server is there)
    assert requests == 0  # (none got through)


@pytest.mark.timeout(60)
def test_a_stale_serve_files_key_waits_its_timeout_as_the_python_client(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """A serve file whose CURVE key is not the server's (the file of an earlier trainer
    at that endpoint): not certain to be a mistake, so the request waits its timeout
    (1 s here), as before and as the Python client, and no backoff follows."""
    if not zmq.has("curve"):
        pytest.skip("pyzmq's libzmq was built without CURVE")
    with answering_server(tmp_path / "rv", curve=True) as (server, _):
        entry = json.loads((tmp_path / "rv" / "serve_0.json").read_text())
        entry["curve_public_key"] = zmq.curve_keypair()[0].decode("ascii")
        (tmp_path / "stale").mkdir()
        (tmp_path / "stale" / "serve_0.json").write_text(json.dumps(entry))
        env = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "stale")}
        results = c_predict.statuses(env, 1, 1)
        requests = server.telemetry().get("requests", 0)
    if any("built without" in message for _, message in results):
        pytest.skip(f"the C client's libzmq: {results}")
    for code, message in results:
        assert code == MT_ETIMEDOUT, message
        assert message == (
            "no connection to the trainer's serving endpoint within 1.0 s "
            f"(the trainer is gone or restarting; {TOO_SHORT})"
        )
    assert requests == 0
