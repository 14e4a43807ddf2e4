"""A `Predictor`'s serving key read from a serve file is named as the serve file's, not
as one given: a key that is not a 40-character Z85 key said "the serving endpoint's
CURVE key (curve_server_key or MELISSA_TRAINER_SERVE_KEY) must be ...", which nobody
gave (and a key that is not a string at all raised a bare TypeError from ``len``). It
names the file's curve_public_key now (`predict_errors.malformed_serve_key`), as the C
client does (clients/c/src/serve.c, read here from its source; a build compares the
two: tests/c/test_c_predict_serve_file_key_words.py). A serve file's key refused by a
plain serving socket: tests/client/test_predict_handshake_serve_file_key.py.

Real serve files (a real `PredictServer`'s, rewritten); the error comes before any
connection. Failed before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from predict_server import answering_server

from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.client.predict_errors import PLAIN_SERVE_FILE, malformed_serve_key

SRC = Path(__file__).resolve().parents[2] / "clients" / "c" / "src"


def literals(name: str) -> str:
    """The C source `name` with its adjacent string literals joined (as the compiler)."""
    return re.sub(r'"(?:\s|\\\n)*"', "", (SRC / name).read_text())


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("key", "fault"),
    [("x" * 39, "40 characters, not 39"), (42, "a str, not int")],
    ids=["short", "not-a-string"],
)
def test_a_malformed_key_of_a_serve_file_names_the_file(
    tmp_path: Path, key: object, fault: str
) -> None:
    with answering_server(tmp_path / "rv"):
        entry = json.loads((tmp_path / "rv" / "serve_0.json").read_text())
    entry["curve_public_key"] = key
    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / "serve_0.json").write_text(json.dumps(entry))
    with (
        Predictor(0, rendezvous_dir=tmp_path / "stale") as predictor,
        pytest.raises(ValueError) as error,
    ):
        predictor.predict({"u": np.zeros(4, np.float32)}, timeout=5)
    said = str(error.value)
    assert said == (
        f"the curve_public_key of the serve file {tmp_path / 'stale' / 'serve_0.json'} must "
        f"be the 40-character Z85 public key, not {key!r} (it must be {fault}): the trainer "
        "writes its own there; is that file the trainer's?"
    ), said
    assert ENV_SERVE_KEY not in said and "curve_server_key" not in said, said  # (before)


def test_a_malformed_key_given_keeps_its_words() -> None:
    """(the guard: the variable's key is named as before)"""
    said = str(malformed_serve_key("x", "40 characters, not 1", ENV_SERVE_KEY, None))
    assert said.startswith(
        f"the serving endpoint's CURVE key (curve_server_key or {ENV_SERVE_KEY})"
    )


def test_the_serve_files_words_are_the_c_client_s() -> None:
    """serve.c file_key and predict_watch.c refused_handshake, with C's conversions for
    the Python values (and the variable's name for `{env_rendezvous}`)."""
    python = str(malformed_serve_key("@KEY@", "@FAULT@", ENV_SERVE_KEY, "@DIR@/serve_@RANK@.json"))
    for value, conversion in [("'@KEY@'", "%s"), ("@FAULT@", "%s"), ("@DIR@", "%s")]:
        python = python.replace(value, conversion)
    assert python.replace("@RANK@", "%lld") in literals("serve.c"), python
    plain = PLAIN_SERVE_FILE.format(rank="%lld", env_rendezvous="MELISSA_TRAINER_RENDEZVOUS")
    assert plain in literals("predict_watch.c"), plain


@pytest.mark.timeout(60)
def test_a_key_of_4301_digits_is_said_as_the_int_it_is(tmp_path: Path) -> None:
    """Failed before: json.loads refused the file ("Exceeds the limit (4300 digits)"), so
    the Predictor skipped it and waited out the request (PredictTimeout) where the C
    client said the key at once; both say it now, an int, as C says it."""
    digits = "9" * 4301
    with answering_server(tmp_path / "rv"):
        entry = json.loads((tmp_path / "rv" / "serve_0.json").read_text())
    entry["curve_public_key"] = "@KEY@"
    (tmp_path / "stale").mkdir()
    text = json.dumps(entry).replace('"@KEY@"', digits)
    (tmp_path / "stale" / "serve_0.json").write_text(text)
    with (
        Predictor(0, rendezvous_dir=tmp_path / "stale") as predictor,
        pytest.raises(ValueError) as error,
    ):
        predictor.predict({"u": np.zeros(4, np.float32)}, timeout=2)
    assert f"key, not {digits} (it must be a str, not int): the trainer" in str(error.value)
