"""Review hrev8 (2026-12-07): `rank_bounds.HugeInt`, the reader's value of a JSON integer
past Python's int() digit limit (4301 digits), subclasses ``str``, so every
``isinstance(value, str)`` check of a rank file's reader takes such an integer for a
string. A rank file whose ``endpoint`` (or ``follow_endpoint``) is an integer of 4301
digits is taken by the Python client, its endpoint the digits; the C client refuses it
as "invalid" quoted as its text (clients/c/src/rendezvous.c: an endpoint must be a JSON
string), and before ff206ec0 Python refused it too ("unreadable": json.loads raised).

The oracle: the C client's words for that file (rendezvous.c:265, "NAME invalid
(TEXT)"), written out. Failed before hfix8 made HugeInt neither a str nor an int."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.stream.endpoints import fetch_rendezvous

pytestmark = pytest.mark.timeout(60)

LONG = "9" * 4301
ENDPOINT = "tcp://127.0.0.1:5001"
FILES = {
    "endpoint": f'{{"version": 1, "rank": 0, "world_size": 1, "endpoint": {LONG}}}',
    "follow_endpoint": (
        f'{{"version": 1, "rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}", '
        f'"follow_endpoint": {LONG}}}'
    ),
}


@pytest.mark.parametrize("key", list(FILES))
def test_an_integer_of_4301_digits_is_not_a_string(tmp_path: Path, key: str) -> None:
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    text = FILES[key]
    (rv / "rank_0.json").write_text(text)
    with pytest.raises(TimeoutError) as caught:  # (taken: no error, the entry returned)
        fetch_rendezvous(rv, timeout=0.2)
    assert f"rank_0.json invalid ({text})" in str(caught.value)
