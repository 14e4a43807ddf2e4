"""The C client checks a serving endpoint given (``mt_set_serve_endpoints``,
``MELISSA_TRAINER_SERVE_ENDPOINTS``) for the forms the Python `Predictor` checks
(client/predict_lookup.py ``endpoint_fault``, tests/client/test_predictor_endpoint_form.py),
in its words: no port, no host, a port not 1 to 65535 (``*`` and 0 are a bind's), the
host ``*``, no ``://``, an ipc or inproc endpoint without a path or a name. The argument
is checked at the call (``MT_EINVAL``, as ``Predictor(endpoint=...)`` at construction,
"mt_set_serve_endpoints: " for its "Predictor(endpoint=...): "), each endpoint of its
list; the variable at the request (``MT_EENV``, as Python's ValueError then), the
endpoint of this simulation's rank (as Python).

Before, both were checked for "://" only: ``tcp://127.0.0.1`` and ``tcp://*:5555`` got
libzmq's bare "Invalid argument", ``tcp://:5`` and ``tcp://a:1;b`` were dialled (a
timeout: "refused the connection"), ``tcp://host:0`` looked its host up, and a form
without "://" was "serving endpoints must be like tcp://HOST:PORT, got '<the list>'".
An unknown transport is ZeroMQ's to judge, in both clients (at the request)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script

from melissa_trainer.client.predict import Predictor

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EINVAL, MT_EENV, MT_ETIMEDOUT = 1, 6, 8
ENV = "MELISSA_TRAINER_SERVE_ENDPOINTS"
BAD = [
    "tcp://127.0.0.1",
    "tcp://127.0.0.1:",
    "tcp://[::1]",
    "tcp://[::1]:9]",
    "tcp://:5555",
    "tcp://",
    "tcp://a:1;b",
    "tcp://host:55x",
    "tcp://host:70000",
    "tcp://host:*",
    "tcp://host:0",
    "tcp://*:5555",
    "tcp://it's:5x",  # (quoted as Python's repr: "...")
    "ipc://",
    "inproc://",
    "localhost:5555",
]
#: the stream's endpoint (nothing listens: the start succeeds), then a request
ASK = "input u 1 1 4 : 1 2 3 4\noutput y 1 4\npredict 5\nabort\n"


def script(sim: int, serve: str | None = None) -> str:
    """Start simulation `sim`, set the serving endpoints (line 5) if given, ask (line 8)."""
    given = f"serve {serve}" if serve is not None else "# from the variable"
    return f"id {sim}\nendpoints tcp://127.0.0.1:9\nfield x 1 1 3\nstart\n{given}\n{ASK}"


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MELISSA_* variable for the Python client (run_script drops them for the C one)."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)


def python_request(sim: int) -> str:
    """The Python `Predictor`'s error at a request (its variables set)."""
    predictor = Predictor(sim)
    try:
        with pytest.raises(ValueError) as error:
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=5)
    finally:
        predictor.close()
    return str(error.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("endpoint", BAD)
def test_a_malformed_endpoint_of_the_variable_is_said_at_the_request(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    endpoint: str,
) -> None:
    listed = f"tcp://127.0.0.1:9, {endpoint}"  # (simulation 1: the second)
    got = run_script(script_exe, script(1), tmp_path, {ENV: listed})
    monkeypatch.setenv(ENV, listed)
    assert got[8] == (MT_EENV, python_request(1)), got


@pytest.mark.timeout(60)
@pytest.mark.parametrize("endpoint", BAD)
def test_a_malformed_endpoint_is_refused_by_mt_set_serve_endpoints(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,
    endpoint: str,
) -> None:
    """Each endpoint of the list is checked; nothing kept (the request that follows
    finds no endpoint: no variable, no rendezvous)."""
    got = run_script(script_exe, script(0, f"tcp://127.0.0.1:9, {endpoint}"), tmp_path)
    with pytest.raises(ValueError) as error:
        Predictor(0, endpoint=endpoint).close()
    python = str(error.value).replace("Predictor(endpoint=...)", "mt_set_serve_endpoints")
    assert got[5] == (MT_EINVAL, python), got
    assert got[8][0] == MT_EENV and got[8][1].startswith("no serving endpoint: set"), got


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "endpoints",
    [
        "tcp://127.0.0.1:9",
        "tcp://[::1]:9",
        "tcp://127.0.0.1:0;127.0.0.1:9",
        "tcp://127.0.0.1:000009",
        "tcp://127.0.0.1:9, tcp://host",  # (another rank's, not checked: as Python)
    ],
)
def test_well_formed_endpoints_are_dialled(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    endpoints: str,
) -> None:
    """(nothing listens: the request is refused at once, a timeout, by both clients)"""
    got = run_script(script_exe, script(0), tmp_path, {ENV: endpoints})
    assert got[8][0] == MT_ETIMEDOUT and "refused the connection" in got[8][1], got
    if "," not in endpoints:
        assert run_script(script_exe, script(0, endpoints), tmp_path)[5] == (0, "")
        Predictor(0, endpoint=endpoints).close()


@pytest.mark.timeout(60)
def test_an_unknown_transport_is_zeromqs_to_judge_in_both_clients(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
) -> None:
    got = run_script(script_exe, script(0), tmp_path, {ENV: "foo://x"})
    monkeypatch.setenv(ENV, "foo://x")
    python = re.sub(r" \(addr=.*\)$", "", python_request(0))  # (pyzmq's own detail)
    assert got[8] == (MT_EINVAL, python), got
    assert python == "cannot connect to serving endpoint 'foo://x': Protocol not supported"
