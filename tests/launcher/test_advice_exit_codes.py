"""An exit code that carries a signal reads as one wherever the launcher shows it: the
advice on a deterministic failure, the lists of a simulation's exit codes (its failure
line, the study's account, a study's error) and a worker's exit, all through
`exit_cause` (`code_text`, `codes_text`; `exit_text` for the long form): a raw ``exit
143`` or ``[143, 143]`` reads as the solver's own code, not a SIGTERM (128 + 15)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import pytest
from launcher_said import one_line

from melissa_trainer.launcher.account import SimulationOutcome, study_account
from melissa_trainer.launcher.advice import Advice
from melissa_trainer.launcher.exit_cause import code_signal, code_text, codes_text, exit_text
from melissa_trainer.launcher.reports import failure_report
from melissa_trainer.launcher.simulation_record import SimulationRecord


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (143, "143 (SIGTERM)"),  # a shell's, a Slurm job's: 128 + 15
        (-15, "-15 (SIGTERM)"),  # a local process's
        (137, "137 (SIGKILL)"),
        (-9, "-9 (SIGKILL)"),
        (139, "139 (SIGSEGV)"),
        (1, "1"),
        (128, "128"),
        (255, "255"),  # 128 + 127: no signal's
        ("timeout", "timeout"),
    ],
)
def test_a_code_says_its_signal(code: int | str, said: str) -> None:
    assert code_text(code) == said
    assert (code_signal(code) is None) == ("(" not in said)


def test_the_long_and_the_short_form_agree() -> None:
    """One reading of a code (`code_signal`): `exit_text` names the same signal."""
    for code in (143, -15, 137, -9, 139, 1, 255):
        sig = code_signal(code)
        long = exit_text(code)
        assert (
            long == f"exit {code}" if sig is None else long.startswith(f"exit {code} ({sig.name}")
        )


def test_a_list_of_codes_names_each_signal() -> None:
    assert codes_text([1, 143, "timeout", -9]) == "[1, 143 (SIGTERM), 'timeout', -9 (SIGKILL)]"
    assert codes_text([1, 1]) == str([1, 1])  # plain codes read as before


def test_the_advice_on_a_repeated_failure_names_the_signal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two attempts ended by SIGTERM (a scancel, a kill): the advice says ``exit 143
    (SIGTERM)``, and its list of codes the same, not a bare ``143``."""
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher"):
        Advice(worker_mode=False).failed(3, [128 + signal.SIGTERM, 128 + signal.SIGTERM])
    (said,) = [one_line(r.getMessage()) for r in caplog.records]
    assert said.startswith("simulation 3 failed again (exit 143 (SIGTERM)) on its restart"), said
    assert "(exit codes [143 (SIGTERM), 143 (SIGTERM)])" in said, said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher"):
        Advice(worker_mode=False).failed(4, [-signal.SIGKILL, -signal.SIGKILL])
    (said,) = [one_line(r.getMessage()) for r in caplog.records]
    assert said.startswith("simulation 4 failed again (exit -9 (SIGKILL)) on its restart"), said


def test_a_simulation_line_names_the_signal() -> None:
    record = SimulationRecord(parameters={"a": 0.5}, exit_codes=[143, 1])
    assert "exit codes [143 (SIGTERM), 1]" in record.describe(2), record.describe(2)


def test_the_study_account_names_the_signal() -> None:
    failed = [SimulationOutcome(5, "failed", [137, 137], "", {"a": 0.1}, 2)]
    lines, _ = study_account(failed, {})
    assert any("exit codes [137 (SIGKILL), 137 (SIGKILL)]" in line for line in lines), lines


def test_a_study_error_names_the_signal_of_those_that_failed_alike(tmp_path: Path) -> None:
    for sid in (0, 1):
        (tmp_path / f"sim-{sid}.log").write_text("step 3\n")
    failed = [(0, "simulation 0", (143, 143)), (1, "simulation 1", (143, 143))]
    lines = failure_report(failed, lambda sid: tmp_path / f"sim-{sid}.log", tmp_path)
    assert "failed alike (exit codes [143 (SIGTERM)], the same" in lines[0], lines


def test_a_repeated_not_delivered_is_not_called_the_solver_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Exit 75 twice (a worker's `NOT_DELIVERED_EXIT_CODE`: the trainer did not take the
    data or confirm the BYE): the advice points at the trainer, and does not offer
    ``final_exit_codes=(75,)``, which would give up every simulation a trainer's hiccup
    failed (before: it did, as for a solver's own deterministic code)."""
    from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE

    assert NOT_DELIVERED_EXIT_CODE == 75  # (the words below are the launcher's, for 75)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher"):
        advice = Advice(worker_mode=True)
        advice.failed(6, [75, 75])
        advice.failed(7, [1, 1])  # (said once per study, whichever came first)
    (said,) = [one_line(r.getMessage()) for r in caplog.records]
    assert said.startswith("simulation 6 failed again (exit 75) on its restart"), said
    assert "NOT_DELIVERED_EXIT_CODE" in said and "look at the trainer" in said, said
    assert "final_exit_codes" not in said and "deterministic" not in said, said
