"""`helpers.exit_path_abort`: which failed ``accelerate launch`` runs the tests' `run_group`
lets through (a rank's abort in the interpreter's exit, the open teardown bug), and
which it does not."""

from __future__ import annotations

from helpers import exit_path_abort

ABORT = (
    "terminate called without an active exception\n"
    "Fatal Python error: Aborted\n\n"
    "Thread 0x00007f0f30a38b80 (most recent call first):\n"
    "  <no Python frame>\n\n"
    "Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)\n"
    "W1129 ... Sending process 31606 closing signal SIGTERM\n"
    "Traceback (most recent call last):\n  File accelerate ...\nChildFailedError\n"
)


def test_an_abort_in_the_exit_path_only_is_let_through() -> None:
    assert exit_path_abort("some warning\n" + ABORT)


def test_a_failed_run_or_an_abort_inside_python_is_not() -> None:
    failed = "Traceback (most recent call last):\n  File train.py\nValueError: x\n"
    assert not exit_path_abort(failed + ABORT)  # the script failed first
    assert not exit_path_abort(failed)
    in_python = ABORT.replace("<no Python frame>", 'File "train.py", line 3 in main')
    assert not exit_path_abort(in_python)  # aborted while the script ran
    assert not exit_path_abort(ABORT.replace("Fatal Python error: Aborted\n", ""))
