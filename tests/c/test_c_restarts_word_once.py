"""Review hrev9 (2026-12-07): the C close says the invalid-restarts_left word once, as
the Python close does ("(once)": tests/client/test_stop_restarts_left.py)? No: twice
(found 2026-12-07): `mt_stop_preempted_words` (stop_said.c) reads every record afresh
with a zeroed `mt_stop_look`, so each of its calls (the close's notice, its give-up)
says the word again; stop_record.c's `restarts_warned` holds only within one look."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_preempted_words import MT_ETIMEDOUT, preempted_then

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]


@pytest.mark.xfail(strict=True, reason="hrev9: C says the restarts_left word twice, Python once")
def test_the_invalid_restarts_left_word_is_said_once(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / "rv"

    def invalid(record: dict[str, Any]) -> None:
        record["reason"]["restarts_left"] = "x"

    _, closed, lines, err = preempted_then(
        script_exe, rendezvous, "close", code="error", message="boom", edit=invalid
    )
    code = int(lines[closed][-1].split(" ", 1)[0])
    assert code == MT_ETIMEDOUT, (lines[closed], err)
    said = err.count("its restarts_left is not an integer")
    assert said == 1, err
