"""A stop record whose key is repeated is read by the C client as Python's json.loads
reads it: the last value of the key (one lookup, json.c mt_json_find, where
stop_record.c and missing_dir.c each kept a copy that took the first, and
rendezvous_ranks.c one that took the last). The oracle: the Python client's words on
the same directory, and the last message written out here.

Failed before: C said the first reason's message ("the first words"), Python the
last's."""

from __future__ import annotations

from pathlib import Path

import pytest
from bounded_rendezvous import ENDPOINT, python_words
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_rendezvous_bounds import c_words

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # (a build and processes)

FIRST = '{"code": "error", "message": "the first words"}'
LAST = '{"code": "error", "message": "the last words"}'
#: a stopped rank file whose stop record says its reason twice (keys repeated)
TEXTS = {
    "reason repeated": (
        f'{{"version": 1, "rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}", '
        f'"stopped": true, "stop_record": {{"reason": {FIRST}, "reason": {LAST}}}}}'
    ),
    "message repeated": (
        f'{{"version": 1, "rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}", '
        '"stopped": true, "stop_record": {"reason": {"code": "error", "message": '
        '"the first words", "message": "the last words"}}}'
    ),
}


@pytest.mark.parametrize("name", list(TEXTS))
def test_a_repeated_key_of_a_stop_record_is_its_last_in_c_as_in_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    name: str,
) -> None:
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    (rv / "rank_0.json").write_text(TEXTS[name])
    said = c_words(script_exe, rv, tmp_path)
    assert "rank_0.json: its trainer stopped (error: the last words)" in said, said
    assert said == python_words(rv, 0.2)
