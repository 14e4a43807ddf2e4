"""A ``rank_0.json`` marked stopped read alike by the C client's lookup and the Python
one (clients/c/src/missing_dir.c mt_stop_reason; melissa_trainer/client/predict_lookup.py
stop_reason, through `rank_bounds.read_object`, the one reader of rendezvous files):
the same bytes in, the same words out, whether the file is a stop, not JSON, not a JSON
object or not UTF-8.

Failed before: C took a file with white space before its object for no stop ("no
trainer serves predictions there"), Python for a stop; Python's json.loads refused a
file holding an integer of 4301 digits (no stop), C read it (a stop). The oracle: the
words written here (a stop's, or no trainer's), and each client's against the other's.

Real parts: the compiled client (`clients/c/tests/mt_script.c`) in its own process, the
Python `Predictor` in this one; the files written by hand (bytes no trainer writes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_env_parity import ASK, RENDEZVOUS, by_hand  # noqa: F401
from test_c_stop_words_cut import python_words

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]  # (a build and a process)

RECORD = '"stop_record": {"reason": {"code": "error", "message": "boom"}}'
STOP = f'{{"stopped": true, {RECORD}}}'
#: a stop's words (both clients), and no trainer's
STOPPED = "the trainer that ran there stopped (error: boom; "
NONE = "no trainer serves predictions there"
#: rank_0.json's bytes -> whether both clients read a stop there
FILES: dict[str, tuple[bytes, bool]] = {
    "a stop": (STOP.encode(), True),
    "white space before": (b" \n\t" + STOP.encode(), True),
    "a member of 4301 digits": (f'{{"n": {"7" * 4301}, {STOP[1:]}'.encode(), True),
    "stopped repeated, true last": (f'{{"stopped": false, {STOP[1:]}'.encode(), True),
    "stopped repeated, false last": (f'{STOP[:-1]}, "stopped": false}}'.encode(), False),
    "a string not UTF-8": (
        f'{STOP[:-1]}, "x": "\udcff"}}'.encode("utf-8", "surrogateescape"),
        False,
    ),
    "a UTF-8 BOM before": (b"\xef\xbb\xbf" + STOP.encode(), False),
    "not JSON": (STOP[:-1].encode(), False),
    "an array": (f"[{STOP}]".encode(), False),
    "empty": (b"", False),
}


@pytest.mark.parametrize("name", list(FILES))
def test_a_stopped_rank_file_is_read_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    by_hand: None,  # noqa: F811
    name: str,
) -> None:
    data, stopped = FILES[name]
    rv = tmp_path / "rv"
    rv.mkdir()
    (rv / "rank_0.json").write_bytes(data)
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, {RENDEZVOUS: str(rv)})
    python = python_words(rv)
    assert (STOPPED in python) is stopped, python  # (the literal oracle)
    assert stopped or f"within 1.0 s: {NONE}" in python, python
    assert got[7][1] == python, (got, python)


def test_the_files_are_what_they_say() -> None:
    """The oracle's own check: the stops are JSON that Python reads as one."""
    for name, (data, stopped) in FILES.items():
        if stopped and name != "white space before":
            entry = json.loads(data.decode(), parse_int=str)
            assert entry["stopped"] is True, name
