"""The C client's `MELISSA_TRAINER_SERVE_KEY`, as the Python client's
(`melissa_trainer.client.predict`): the serving sockets' CURVE key for the endpoints of
`MELISSA_TRAINER_SERVE_ENDPOINTS` (a serve file brings its own key, and the variable is
ignored then); a key that is not 40 Z85 characters (all checked: `mt_z85_fault`, as the
stream key) is an error naming the variable
(`MT_EENV`), as the Python client's `ValueError` is, not a timeout. The oracle: the
real `PredictServer` with CURVE keys answers only a client that has its public key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from predict_runs import CPredict
from predict_script import MT_EENV, outputs_of, status
from predict_server import VERSION, answering_server

from melissa_trainer.client.predict import Predictor

pytestmark = pytest.mark.e2e  # every test here starts a process


def ask(c_predict: CPredict, env: dict[str, str], timeout: float) -> tuple[int, str, int]:
    """One prediction by an mt_script with `env`: its status, message and version."""
    lines, [line] = c_predict.replies(env, timeout)
    code, message = status(lines, line)
    return code, message, outputs_of(lines, line)[0]


@pytest.mark.timeout(180)
def test_serve_key_from_the_environment_as_the_python_client(
    c_predict: CPredict,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with answering_server(tmp_path, curve=True) as (server, public):
        listed = {"MELISSA_TRAINER_SERVE_ENDPOINTS": server.endpoint or ""}
        keyed = ask(c_predict, {**listed, "MELISSA_TRAINER_SERVE_KEY": f" {public} "}, 20)
        bad = ask(c_predict, {**listed, "MELISSA_TRAINER_SERVE_KEY": "not-a-key"}, 0.5)
        # a serve file has its own key: the variable is not read then (even a bad one)
        filed = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path), "MELISSA_TRAINER_SERVE_KEY": "x"}
        from_file = ask(c_predict, filed, 20)
        # the Python client's error, the oracle of the C client's
        for name, value in {**listed, "MELISSA_TRAINER_SERVE_KEY": "not-a-key"}.items():
            monkeypatch.setenv(name, value)
        predictor = Predictor(simulation_id=7)
        try:
            with pytest.raises(ValueError) as python_error:
                predictor.predict({"u": np.arange(4, dtype=np.float32)}, timeout=0.5)
        finally:
            predictor.close()
    if keyed[0] != 0 and "built without" in keyed[1]:
        pytest.skip(f"the C client's libzmq: {keyed[1]}")
    assert keyed[0] == 0 and keyed[2] == VERSION, keyed
    assert bad[0] == MT_EENV, bad
    said = "must be the 40-character Z85 public key, not 'not-a-key'"
    assert said in bad[1] and "MELISSA_TRAINER_SERVE_KEY" in bad[1], bad
    assert said in str(python_error.value)
    assert from_file[0] == 0 and from_file[2] == VERSION, from_file
    # (the endpoint given: the C client asked the trainer's inputs once, DESCRIBE; the
    # serve file's request did not need to)
    assert server.telemetry() == {"requests": 2, "answered": 2, "described": 1}


#: one character outside Z85 (a 40-character key libzmq refused with a bare "Invalid
#: argument"), and groups over 2**32 (taken as some other key): as test_c_stream_key_z85's
OUTSIDE = 'rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf"'
OVERFLOW = "#" * 40


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", [OUTSIDE, OVERFLOW], ids=["outside", "overflow"])
def test_a_serve_key_that_is_not_z85_is_refused_in_the_python_clients_words(
    c_predict: CPredict,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
) -> None:
    """Checked as the stream key is (`server_key.z85_fault`, C `mt_z85_fault`): before,
    only its length was, in both clients."""
    env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": "tcp://127.0.0.1:9", "MELISSA_TRAINER_SERVE_KEY": key}
    code, message, _ = ask(c_predict, env, 0.5)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    predictor = Predictor(simulation_id=7)
    try:
        with pytest.raises(ValueError) as python_error:
            predictor.predict({"u": np.arange(4, dtype=np.float32)}, timeout=0.5)
    finally:
        predictor.close()
    # (the C client has no argument for the key: it names the variable alone)
    assert message.startswith("the serving endpoint's CURVE key (MELISSA_TRAINER_SERVE_KEY)")
    tail = ") must be the 40-character Z85 public key, not "
    assert (code, message.split(tail)[1]) == (MT_EENV, str(python_error.value).split(tail)[1])
    assert "(it must be Z85" in message, message
