"""A review's finding (failed before the buffers were sized MT_CAUSE_SIZE,
close_checks.h): the C client's words of a preempted
trainer (stop_said.c mt_stop_preempted_words) are written into fixed ``cause[1024]``
buffers (close_wait.c, close_failed.c, send_wait.c, send_words.c, send_notice.c). hpred
made the quoted message 200 UTF-8 characters (up to 800 bytes) where it was 200 bytes,
so a message of 3-byte characters and a rendezvous path of some 400 bytes no longer fit:
the end of the words (the path, the closing parenthesis) is cut by snprintf, where the
Python client (client/stopped.py `StopRecords.preempted`) says them whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_preempted_words import MT_ETIMEDOUT, preempted_then

pytestmark = [
    pytest.mark.e2e,  # a process of its own (the solver)
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]


def test_a_long_message_and_path_are_said_whole_as_python_says_them(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / ("d" * 200) / ("e" * 200)
    message = "€" * 300
    _, closed, lines, err = preempted_then(script_exe, rendezvous, "close", message=message)
    code, said = (lines[closed][-1].split(" ", 1) + [""])[:2]
    assert int(code) == MT_ETIMEDOUT, (lines[closed], err)
    whole = f"the trainer was preempted ({'€' * 200}; its stop record in {rendezvous})"
    assert whole in said, said[-600:]
