"""Review hrev8 (2026-12-07): a rank file whose ``endpoint`` or ``follow_endpoint`` is a
JSON integer of 4301 digits. The C client refuses it ("rank_0.json invalid (TEXT)": an
endpoint is a JSON string, clients/c/src/rendezvous.c); the Python client took it, its
`rank_bounds.HugeInt` being a ``str`` (tests/stream/test_rendezvous_huge_int_as_string.py).
The first test pins the C words (the oracle, written out); the second, that Python says
the same, failed before hfix8 made HugeInt neither a str nor an int."""

from __future__ import annotations

from pathlib import Path

import pytest
from bounded_rendezvous import python_words
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401
from test_c_rendezvous_bounds import c_words

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # (a build and processes)

LONG = "9" * 4301
ENDPOINT = "tcp://127.0.0.1:5001"
FILES = {
    "endpoint": f'{{"version": 1, "rank": 0, "world_size": 1, "endpoint": {LONG}}}',
    "follow_endpoint": (
        f'{{"version": 1, "rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}", '
        f'"follow_endpoint": {LONG}}}'
    ),
}


def write(tmp_path: Path, key: str) -> Path:
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    (rv / "rank_0.json").write_text(FILES[key])
    return rv


@pytest.mark.parametrize("key", list(FILES))
def test_c_refuses_an_integer_for_an_endpoint(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    key: str,
) -> None:
    said = c_words(script_exe, write(tmp_path, key), tmp_path)
    assert f"0.2 s: rank_0.json invalid ({FILES[key]}) (is the" in said, said[:300]


@pytest.mark.parametrize("key", list(FILES))
def test_python_refuses_it_in_the_words_of_c(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    key: str,
) -> None:
    rv = write(tmp_path, key)
    assert python_words(rv, 0.2) == c_words(script_exe, rv, tmp_path)
