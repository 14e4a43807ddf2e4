"""``Predictor(curve_server_key=...)`` is checked as ``Client(curve_server_key=...)`` is
(tests/client/test_server_key_argument.py): a key that is not a 40-character Z85 key is a
`ConfigError` at construction, in the client's words (before: at the first request, a
ValueError naming the variable too; the bytes of `zmq.curve_keypair` failed there), and
with a rendezvous it must be the key of the serve file read, the running trainer's
(before: silently ignored, the serve file's key used instead).

Real serving sockets (`PredictServer`, CURVE or not) and their real serve files. Failed
before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_server import answering_server

from melissa_trainer.client import Client, Predictor
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.config.reading import ConfigError

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")

INPUTS = {"u": np.zeros(4, np.float32)}


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("bad", ["x" * 39, "#" * 40, 42], ids=["short", "overflow", "int"])
def test_a_bad_key_is_a_config_error_at_construction_as_the_clients(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        Predictor(0, endpoint="tcp://127.0.0.1:9", curve_server_key=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as client_error:
        Client({"u": ((4,), "float32")}, simulation_id=0, endpoints="tcp://127.0.0.1:9",
               curve_server_key=bad)  # type: ignore[arg-type]  # fmt: skip
    assert str(caught.value) == str(client_error.value)
    assert str(caught.value).startswith(f"curve_server_key={bad!r} must be "), caught.value


@pytest.mark.timeout(60)
def test_the_bytes_of_curve_keypair_are_taken(tmp_path: Path) -> None:
    with answering_server(tmp_path, curve=True) as (server, public):
        assert public is not None
        given = public.encode("ascii")  # (as zmq.curve_keypair gives it)
        with Predictor(0, endpoint=server.endpoint, curve_server_key=given) as predictor:
            outputs, _ = predictor.predict(INPUTS, timeout=20)
    assert set(outputs)  # (the oracle: the server answered over CURVE)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("curve", [True, False], ids=["another-key", "plain"])
def test_with_a_serve_file_it_must_be_the_published_key(tmp_path: Path, curve: bool) -> None:
    mine = zmq.curve_keypair()[0].decode("ascii")
    with (
        answering_server(tmp_path, curve=curve) as (_, public),
        Predictor(0, rendezvous_dir=tmp_path, curve_server_key=mine) as predictor,
        pytest.raises(ConfigError) as caught,
    ):
        predictor.predict(INPUTS, timeout=20)
    said = str(caught.value)
    assert said == (
        f"curve_server_key={mine!r} is not the key the serve file {tmp_path / 'serve_0.json'} "
        f"publishes ({public}; None: it serves plain connections): the serve file gives the "
        "running trainer's key, so drop curve_server_key= (or pass endpoint= for a serving "
        "socket that takes this key)"
    ), said


@pytest.mark.timeout(60)
def test_the_published_key_given_again_is_taken(tmp_path: Path) -> None:
    """(the guard: the serve file's own key is no conflict)"""
    with (
        answering_server(tmp_path, curve=True) as (_, public),
        Predictor(0, rendezvous_dir=tmp_path, curve_server_key=public) as predictor,
    ):
        outputs, _ = predictor.predict(INPUTS, timeout=20)
    assert set(outputs)
