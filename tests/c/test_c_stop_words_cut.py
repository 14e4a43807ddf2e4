"""The C client and the Python one say the same characters of a stop record's strings
and read the same serve files (the C rules: tests/client/test_stop_words_as_c_reads.py
checks Python's words against literals):

* a late solver's words quote a code of 40 non-ASCII characters as its first 32 (C cut
  32 bytes, 16 characters; Python none) and a message up to its ``\\u0000`` (Python
  quoted the rest);
* a `Predictor`'s words quote a message up to its ``\\u0000`` (C cut it, Python not);
* a serve file named with non-ASCII digits, or with more than 9, is no serve file for
  either (Python read it: it dialed the endpoint, C timed out).

Real parts: the compiled client (`clients/c/tests/mt_script.c`) in its own process; the
records written by hand (the strings a receiver would not write), the serve file by
`write_serving`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_env_parity import ASK, RENDEZVOUS, by_hand  # noqa: F401
from test_c_late_solver import start, stopped_study

from melissa_trainer.client.predict import Predictor
from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.e2e  # every test here starts a process

LONG_CODE = "é" * 40


def python_words(rendezvous: Path) -> str:
    """The Python `Predictor`'s error at a request of 1 s (simulation 1)."""
    predictor = Predictor(1, rendezvous_dir=rendezvous)
    try:
        with pytest.raises(TimeoutError) as error:
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=1)
    finally:
        predictor.close()
    return str(error.value)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("code", "message", "said"),
    [
        (LONG_CODE, "x", f"stopped ({'é' * 32}) (a trainer"),
        ("error", "boom\x00tail", "stopped (error: boom) (a trainer"),
    ],
    ids=["long-code", "nul-message"],
)
def test_a_late_solver_says_the_same_characters_of_a_record(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    code: str,
    message: str,
    said: str,
) -> None:
    rv = tmp_path / "rv"
    python = stopped_study(rv, {"reason": {"code": code, "message": message}})
    status, words, _ = start(script_exe, rv, tmp_path, 0.2)
    assert status != 0, words
    assert f"rank_0.json: its trainer {said}" in python, python  # (the literal oracle)
    assert f"rank_0.json: its trainer {said}" in words, words
    assert "tail" not in words and "tail" not in python, (words, python)


@pytest.mark.timeout(60)
def test_a_predictor_says_the_same_characters_of_a_message(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    by_hand: None,  # noqa: F811
) -> None:
    rv = tmp_path / "rv"
    rv.mkdir()
    record = {"reason": {"code": LONG_CODE, "message": "boom\x00tail"}}
    (rv / "rank_0.json").write_text(json.dumps({"stopped": True, "stop_record": record}))
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, {RENDEZVOUS: str(rv)})
    python = python_words(rv)
    assert f"the trainer that ran there stopped ({'é' * 32}: boom; " in python, python
    assert got[7][1] == python, (got, python)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["serve_\u0660.json", "serve_0000000000.json"])
def test_a_serve_file_name_is_read_alike(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    by_hand: None,  # noqa: F811
    name: str,
) -> None:
    rv = tmp_path / "rv"
    rv.mkdir()
    specs = field_specs({"u": ((4,), "float32")})
    write_serving(rv, 0, 1, "tcp://127.0.0.1:1", specs, "run-a", None)
    (rv / "serve_0.json").rename(rv / name)
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, {RENDEZVOUS: str(rv)})
    python = python_words(rv)
    assert python.startswith(
        f"no serving endpoint in '{rv}' within 1.0 s: no trainer serves predictions there"
    ), python
    assert got[7][1] == python, (got, python)
