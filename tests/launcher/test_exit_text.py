"""How the launcher's log names an attempt's end (`failure_policy.exit_text`): a code
that carries a signal says which, with what usually sends it, whichever backend
reported it (a local process's -N, a Slurm job's or a shell's 128 + N): a scancelled
Slurm job read "exit 143", which a Slurm user takes for the solver's own code."""

from __future__ import annotations

import signal

import pytest

from melissa_trainer.launcher.failure_policy import exit_text

TERM = "SIGTERM: scancel, a job's time limit or preemption, or a kill"
KILL = "SIGKILL: the kernel's out-of-memory killer, scancel --signal=KILL, or kill -9"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (128 + signal.SIGTERM, f"exit 143 ({TERM})"),  # a scancelled Slurm batch job
        (-signal.SIGTERM, f"exit -15 ({TERM})"),  # a local process
        (128 + signal.SIGKILL, f"exit 137 ({KILL})"),
        (-signal.SIGKILL, f"exit -9 ({KILL})"),
        (128 + signal.SIGSEGV, "exit 139 (SIGSEGV)"),
    ],
)
def test_a_code_that_carries_a_signal_names_it(code: int, expected: str) -> None:
    assert exit_text(code) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [(0, "exit 0"), (1, "exit 1"), (7, "exit 7"), (128, "exit 128"), (255, "exit 255")],
)
def test_a_plain_exit_code_is_left_alone(code: int, expected: str) -> None:
    assert exit_text(code) == expected


def test_a_string_code_is_left_as_is() -> None:
    assert exit_text("timeout") == "timeout"
