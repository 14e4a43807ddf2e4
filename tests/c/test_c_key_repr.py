"""The C client quotes a bad CURVE key in its error messages as the Python client does,
escape for escape (Python's ``repr``; clients/c/src/z85.c ``mt_py_repr``), and strips a
key read from the environment as Python's ``str.strip`` does.

Before, the C quote escaped fewer code points than Python's ``repr`` (the control and
space characters only: a private-use, unassigned or format character such as U+061C,
U+2066 or U+E0001 came out raw), wrote one past U+FFFF as ``\\uXXXXX`` where Python writes
``\\UXXXXXXXX``, the serve key's message (``MELISSA_TRAINER_SERVE_KEY``) quoted the key
raw ('%s'), and a key read from a variable with a no-break space, ``\\x85`` or
``\\x1c``-``\\x1f`` around it was refused (its length) where the Python client strips
them and takes the key. Each source of a key is checked against the Python client's
message for the same key: the argument (``mt_set_curve_server_key``), the variables
(``MELISSA_TRAINER_KEY``, ``MELISSA_TRAINER_SERVE_KEY``) and a serve file's
``curve_public_key``."""

from __future__ import annotations

import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import zmq
from c_driver import run_script
from compiled import C_SOURCE

from melissa_trainer.client import Client
from melissa_trainer.client.predict import Predictor
from melissa_trainer.client.predict_errors import PredictionUnavailable
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_EINVAL, MT_EENV = 1, 6
KEY = "h9n=PwIqDtlJ+uEdqp.P0jFMaY:th6rd$1kNAU2k"  # (a valid one: zmq.curve_keypair())
FIELDS = {"u": ((4,), "float32")}


def swap(chars: str) -> str:
    """KEY with its first characters replaced by `chars` (40 characters still)."""
    return chars + KEY[len(chars) :]


#: bad keys: the characters outside Z85 of a 40-character key are quoted (sorted, each
#: once), the whole key otherwise (its length)
BAD = {
    "controls": swap("\x01\x02\x1b\x7f"),
    "c1-controls": swap("\x80\x9f\x85"),
    "whitespace-inside": KEY[:10] + "\t\x0b\x0c\x1c" + KEY[14:],
    "short-controls": "\x01ab\x1b",
    "latin": swap("é\xa0\xad"),  # printable, a no-break space, a soft hyphen
    "format": swap("\u061c\u200b\u2066\ufeff"),  # Cf: escaped by Python, not before by C
    "private-unassigned": swap("\ue000\u0378\ufffe"),  # Co, Cn, a noncharacter
    "astral": swap("\U0001f600\U000e0001\U0010ffff"),  # printable, Cf, a noncharacter
    "astral-long": "\U000e0001" + KEY + "\U0001f600",  # (the whole key: \U escapes)
    "squote": swap("'"),
    "dquote": swap('"'),
    "both-quotes": swap("'\""),
    "backslash": swap("\\"),
    "short-quotes-backslash": "a'b\"c\\d",
}
#: bytes that are not UTF-8 (os.environ's surrogateescape): in a variable only
BYTES = {"bytes": swap("\udcff\udcc3"), "bytes-long": "\udce9" + KEY}
#: Python's str.strip takes these off a variable's value (C's isspace did not)
WRAPPED = "\x1c\xa0\x85" + KEY + "\u3000\u2028\x1f"


def c_names(python: str) -> str:
    """The Python client's words with the C API's names (the C client takes the serving
    key from the variable only, and names NULL and zmq_curve_keypair)."""
    for py, c in [
        ("(curve_server_key or MELISSA_TRAINER_SERVE_KEY)", "(MELISSA_TRAINER_SERVE_KEY)"),
        ("zmq.curve_keypair()[0]", "zmq_curve_keypair()"),
        ("; or None for receivers", "; or NULL for receivers"),
    ]:
        python = python.replace(py, c)
    return python


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MELISSA_* variable for the Python client (run_script drops them for the C one)."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)


def predict_words(rendezvous: Path | None, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Python `Predictor`'s error for simulation 7 (its variables already set)."""
    predictor = Predictor(7, rendezvous_dir=rendezvous)
    try:
        with pytest.raises(ValueError) as error:
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=0.5)
    finally:
        predictor.close()
    return c_names(str(error.value))


PREDICT = "id 7\nendpoints tcp://127.0.0.1:9\nfield u 1 1 4\nstart\ninput u 1 1 4 : 1 2 3 4\n"
PREDICT += "output y 1 4\npredict 0.5\nabort\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", [*BAD.values(), *BYTES.values()], ids=[*BAD, *BYTES])
def test_the_stream_key_variable_is_quoted_as_python(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    key: str,
) -> None:
    env = {"MELISSA_TRAINER_ENDPOINTS": "tcp://127.0.0.1:9", "MELISSA_TRAINER_KEY": key}
    got = run_script(script_exe, "id 6\nfield u 1 1 4\nstart\nabort\n", tmp_path, env)[3]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as python_error:
        Client(FIELDS, simulation_id=6)
    assert got == (MT_EENV, c_names(str(python_error.value)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", [*BAD.values(), *BYTES.values()], ids=[*BAD, *BYTES])
def test_the_serve_key_variable_is_quoted_as_python(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    key: str,
) -> None:
    env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": "tcp://127.0.0.1:9", "MELISSA_TRAINER_SERVE_KEY": key}
    got = run_script(script_exe, PREDICT, tmp_path, env)[7]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert got == (MT_EENV, predict_words(None, monkeypatch))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", list(BAD.values()), ids=list(BAD))
def test_a_serve_files_key_is_quoted_as_python(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    key: str,
) -> None:
    rendezvous = tmp_path / "rv"
    write_serving(rendezvous, 0, 1, "tcp://127.0.0.1:9", field_specs(FIELDS), None, key)
    env = {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)}
    got = run_script(script_exe, PREDICT, tmp_path, env)[7]
    assert got == (MT_EENV, predict_words(rendezvous, monkeypatch))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", [*BAD.values(), WRAPPED], ids=[*BAD, "wrapped"])
def test_the_key_argument_is_quoted_as_python(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,
    key: str,
) -> None:
    code, message = run_script(script_exe, f"id 1\ncurve_key {key}\n", tmp_path)[2]
    with pytest.raises(ConfigError) as python_error:
        Client(FIELDS, simulation_id=1, endpoints="tcp://127.0.0.1:9", curve_server_key=key)
    assert (code, message) == (MT_EINVAL, c_names(str(python_error.value)))


@pytest.mark.timeout(60)
def test_a_variables_key_is_stripped_as_python(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
) -> None:
    """Python's str.strip takes the no-break space, U+0085, U+3000, U+2028 and
    \\x1c-\\x1f off: the key is taken, by both clients (nothing listens: the start
    succeeds; the prediction, to an endpoint that refuses, is a timeout, not MT_EENV)."""
    env = {"MELISSA_TRAINER_ENDPOINTS": "tcp://127.0.0.1:9", "MELISSA_TRAINER_KEY": WRAPPED}
    started = run_script(script_exe, "id 6\nfield u 1 1 4\nstart\nabort\n", tmp_path, env)
    assert started[3] == (0, ""), started
    served = {"MELISSA_TRAINER_SERVE_ENDPOINTS": "tcp://127.0.0.1:9"}
    asked = run_script(
        script_exe, PREDICT, tmp_path, {**served, "MELISSA_TRAINER_SERVE_KEY": WRAPPED}
    )
    assert asked[7][0] != MT_EENV, asked
    # (the Python client takes it too, from either variable)
    for name, value in {**env, **served, "MELISSA_TRAINER_SERVE_KEY": WRAPPED}.items():
        monkeypatch.setenv(name, value)
    Client(FIELDS, simulation_id=6).close(bye=False)
    predictor = Predictor(7)
    try:
        with pytest.raises(
            PredictionUnavailable, match="refused the connection: nothing listens there"
        ):  # (not ValueError: the key taken)
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=0.5)
    finally:
        predictor.close()


@pytest.mark.timeout(120)
def test_the_printable_table_is_this_pythons() -> None:
    """clients/c/src/py_printable.c is what make_py_printable.py writes under this
    Python, when its unicodedata is of the file's Unicode version (another version
    assigns other code points: regenerate the file with the Python to match)."""
    table = C_SOURCE / "src" / "py_printable.c"
    if f"Unicode {unicodedata.unidata_version}:" not in table.read_text():
        pytest.skip(f"the table is not of this Python's Unicode {unicodedata.unidata_version}")
    tool = C_SOURCE / "tools" / "make_py_printable.py"
    done = subprocess.run(
        [sys.executable, str(tool), "--check"], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stdout + done.stderr
