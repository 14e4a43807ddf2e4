"""A serve file whose ``curve_public_key`` is not a string (nor null: no CURVE) fails the
C client's `mt_predict` at once, ``MT_EENV`` in the Python `Predictor`'s words
(client/predict_errors.py ``malformed_serve_key``: "... not 123 (it must be a str, not
int) ..."), the value shown as Python shows it once json.loads read it (clients/c/src/
json_repr.c). Before, the C client took such a file for one being replaced and looked
again until the request's timeout (MT_ETIMEDOUT "no serving endpoint ... within 20 s",
the test failed), where the Python Predictor raised at once. A key of 4301 digits (past
Python's int()) the other way round: Python skipped the file (json.loads refused it),
C said it at once; both say it now (stream/rank_bounds.py read_object, type_name).

No trainer: serve files written by hand (`write_serving`, its key then replaced by raw
JSON text); nothing listens at the endpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script

from melissa_trainer.client.predict import Predictor
from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EENV = 6
#: a request's timeout: a client that waits for the file to change fails the test
WAIT = 20
#: raw JSON texts of a key that is not a string, as Python's json.loads reads them
KEYS = [
    "123",
    "-0",
    "123456789012345678901234567890",  # (Python's int is exact)
    "1.5",
    "1E5",
    "-0.0",
    "1e400",  # inf
    "NaN",
    "true",
    "false",
    "[]",
    '[1, "a\\u00e9\\u0001", null, [2.50]]',
    "{}",
    '{"a": 1, "b": {"c": false}, "a": "x\'y"}',  # (a repeated key: first place, last value)
    # (past int()'s 4300 digits: json.loads refused the whole file, which Python skipped,
    # waiting out the request where C said it at once; read now as C reads it)
    "9" * 4301,
    "-" + "9" * 4301,
    "[" + "9" * 4301 + "]",
]
PREDICT = "id 7\nendpoints tcp://127.0.0.1:9\nfield u 1 1 4\nstart\ninput u 1 1 4 : 1 2 3 4\n"
PREDICT += f"output y 1 4\npredict {WAIT}\nabort\n"


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MELISSA_* variable for the Python client (run_script drops them for the C one)."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)


def serve_file_with_key(directory: Path, raw: str) -> None:
    """A serve file of rank 0 of 1 (a run id none asks for) whose curve_public_key is the
    JSON text `raw`."""
    write_serving(directory, 0, 1, "tcp://127.0.0.1:9", field_specs({"u": ((4,), "float32")}),
                  "run-a", None)  # fmt: skip
    entry = json.loads((directory / "serve_0.json").read_text())
    entry["curve_public_key"] = "@KEY@"
    (directory / "serve_0.json").write_text(json.dumps(entry).replace('"@KEY@"', raw))


@pytest.mark.timeout(WAIT + 60)
@pytest.mark.parametrize("raw", KEYS)
def test_a_serve_files_key_of_another_type_fails_at_once_in_pythons_words(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,
    raw: str,
) -> None:
    serve_file_with_key(tmp_path, raw)
    got = run_script(
        script_exe, PREDICT, tmp_path, {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}, WAIT + 30
    )
    predictor = Predictor(7, rendezvous_dir=tmp_path)
    try:
        with pytest.raises(ValueError) as python_error:
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=WAIT)
    finally:
        predictor.close()
    assert got[7] == (MT_EENV, str(python_error.value)), got
    assert "(it must be a str, not " in got[7][1]


@pytest.mark.timeout(60)
def test_a_null_key_is_no_curve(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,
) -> None:
    """(null: a trainer without CURVE; the endpoint, where nothing listens, is dialled)"""
    serve_file_with_key(tmp_path, "null")
    got = run_script(script_exe, PREDICT, tmp_path, {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)})
    assert got[7][0] != MT_EENV and "refused the connection" in got[7][1], got
