"""A rank file and a serve file read alike by the C client and the Python one (clients/c/
src/rendezvous.c, rendezvous_ranks.c, serve_read.c; melissa_trainer/stream/endpoints.py,
rank_bounds.py, serving_rendezvous.py), word for word: a "version", "rank" or
"world_size" is a whole number (not true, nor 1.0), an integer of any number of digits
is read and its bounds said, a file "invalid" is quoted as its text, and a serve file's
world_size is within the rank files' bound (10**9).

Failed before: Python took a version true or 1.0, quoted an invalid file as its dict and
found the integers of 4301 digits "unreadable (Exceeds the limit ...)"; in a serve file
C cast "rank" and "world_size" from a double (undefined past 2^63) and kept the first of
a key repeated, and both took a world_size of 2000000000. The oracle: the words written
out in tests/rendezvous_parse_files.py, and the Python client's."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from bounded_rendezvous import python_words
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401
from rendezvous_parse_files import (
    DISAGREEING,
    LONG,
    NO_SERVER,
    RANK_FILES,
    UNREADABLE_RANK_FILES,
    serve_text,
)
from test_c_rendezvous_bounds import c_words

from melissa_trainer.client.predict import Predictor

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # (a build and processes)

#: a prediction's timeout (s): no serve file is ever read, so each side waits it out
WAIT = 1
PREDICT = "id 7\nendpoints tcp://127.0.0.1:9\nfield u 1 1 4\nstart\ninput u 1 1 4 : 1 2 3 4\n"
PREDICT += f"output y 1 4\npredict {WAIT}\nabort\n"
#: serve files of rank 0 of a simulation 7 that each client refuses (and one of 10**9
#: ranks, within bounds, that both read: "rank 7 of 1000000000 does not serve (yet)")
SERVE = {
    "version true": (serve_text(version="true"), NO_SERVER),
    "rank repeated, a string last": (serve_text(rank2='"0"'), NO_SERVER),
    "world_size true": (serve_text(world_size="true"), NO_SERVER),
    "world_size over 10**9": (serve_text(world_size="2000000000"), NO_SERVER),
    "world_size 2**63": (serve_text(world_size=str(2**63)), NO_SERVER),
    "world_size 10**20": (serve_text(world_size="100000000000000000000"), NO_SERVER),
    # (read by both: C read it, Python's json.loads found it unreadable and skipped it)
    "a member of 4301 digits": (
        serve_text(world_size="2", extra=LONG),
        "rank 1 of 2 does not serve (yet)",
    ),
    # (bytes no UTF-8 decodes, in a string: refused by both, as a rank file is; else
    # "rank 1 of 2 does not serve (yet)")
    "a string not UTF-8": (serve_text(world_size="2", extra='"\udcff"'), NO_SERVER),
    "world_size 10**9": (
        serve_text(world_size="1000000000"),
        "rank 7 of 1000000000 does not serve (yet)",
    ),
}


@pytest.mark.parametrize("name", list(RANK_FILES))
def test_a_rank_file_is_refused_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    name: str,
) -> None:
    text, words = RANK_FILES[name]
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    (rv / "rank_0.json").write_text(text)
    said = c_words(script_exe, rv, tmp_path)
    assert f"0.2 s: rank_0.json invalid ({words or text}) (is the" in said, said
    assert said == python_words(rv, 0.2)


@pytest.mark.parametrize("name", list(UNREADABLE_RANK_FILES))
def test_a_rank_file_of_no_json_object_is_said_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    name: str,
) -> None:
    """Failed before (Python's words): "unreadable (list indices must be integers or
    slices, not str)" of an array, "(Expecting value: line 1 column 1 (char 0))" of an
    empty file, where C said "not a JSON object at character 0", "Expecting value at
    character 0"."""
    text, words = UNREADABLE_RANK_FILES[name]
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    (rv / "rank_0.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    said = c_words(script_exe, rv, tmp_path)
    assert f"0.2 s: rank_0.json unreadable ({words}) (is the" in said, said
    assert said == python_words(rv, 0.2)


@pytest.mark.parametrize("name", list(SERVE))
def test_a_serve_file_is_read_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    text, why = SERVE[name]
    (tmp_path / "serve_0.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    said = c_and_python(script_exe, tmp_path, monkeypatch)
    assert why in said[0], said
    assert said[0] == said[1]


@pytest.mark.parametrize("name", list(DISAGREEING))
def test_serve_files_of_many_world_sizes_are_said_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    """Failed before: C named the first size it read and the last other one."""
    files, why = DISAGREEING[name]
    for file, text in files.items():
        (tmp_path / file).write_text(text)
    said = c_and_python(script_exe, tmp_path, monkeypatch)
    assert why in said[0], said
    assert said[0] == said[1]


def c_and_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, str]:
    """The words of the C client's prediction through the serve files of `tmp_path`, and
    the Python Predictor's."""
    env = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
    got = run_script(script_exe, PREDICT, tmp_path, env, WAIT + 30)
    for variable in [v for v in os.environ if v.startswith("MELISSA_")]:
        monkeypatch.delenv(variable)  # (the Python Predictor's, as run_script's for C)
    predictor = Predictor(7, rendezvous_dir=tmp_path)
    try:
        with pytest.raises(TimeoutError) as python_error:
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=WAIT)
    finally:
        predictor.close()
    return got[7][1], str(python_error.value)
