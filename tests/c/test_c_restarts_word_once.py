"""The C close says the invalid-restarts_left word once per receiver, as the Python
close does ("(once)": tests/client/test_stop_restarts_left.py). Found by review hrev9
(2026-12-07): it said it twice, `mt_stop_preempted_words` (stop_said.c) reading every
record afresh with a zeroed `mt_stop_look`, whose `restarts_warned` held only within one
look; now the client keeps the flag per receiver (restarts_said.h)."""

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
