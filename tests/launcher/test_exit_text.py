"""How the launcher's log names an attempt's end (`failure_policy.exit_text`): a code
that carries a signal says which, with what usually sends it, whichever backend
reported it (a local process's -N, a Slurm job's or a shell's 128 + N): a scancelled
Slurm job read "exit 143", which a Slurm user takes for the solver's own code."""

from __future__ import annotations

import signal

import pytest

from melissa_trainer.launcher.exit_cause import exit_text

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


def test_a_workers_own_codes_are_said_in_words_any_other_as_is() -> None:
    """Worker mode: a worker reports each simulation's end, and two codes are its own
    (`serve_simulations`): 75, the trainer did not take the data (`DeliveryFailed`),
    and 2, its check refused the parameters. Before, the launcher's line said a bare
    ``exit 75``, read as the solver's failure; the worker's log alone said why."""
    from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE, REFUSED_EXIT_CODE
    from melissa_trainer.launcher.exit_cause import worker_exit_text

    assert worker_exit_text(NOT_DELIVERED_EXIT_CODE).startswith("exit 75 (not delivered: ")
    assert worker_exit_text(REFUSED_EXIT_CODE).startswith("exit 2 (its parameters refused: ")
    assert worker_exit_text(1) == "exit 1"  # the solver's own code, as is
    assert worker_exit_text(-9).startswith("exit -9 (SIGKILL")
    assert worker_exit_text("timeout") == "timeout"
