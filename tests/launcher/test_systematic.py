"""`SystematicFailure`'s report: what it blames, from the attempts it was told of."""

from __future__ import annotations

from pathlib import Path

from melissa_trainer.launcher.systematic import SystematicFailure


def report(tmp_path: Path, code: int | str, last_line: str) -> str | None:
    """Four failed attempts of two simulations, each ended with `code` and a log whose
    last line is `last_line`: the check's verdict after the fourth."""
    check = SystematicFailure(4, parameters=("k",))
    verdicts = []
    for attempt, sid in enumerate((0, 1, 0, 1)):
        log = tmp_path / f"sim-{sid}-{attempt}.log"
        log.write_text(f"{last_line}\n" if last_line else "")
        verdicts.append(check.failed(sid, code, log))
    assert verdicts[:3] == [None, None, None]
    return verdicts[3]


def test_attempts_all_killed_for_silence_name_the_startup_timeout(tmp_path: Path) -> None:
    """A solver whose start-up is slower than `startup_timeout` is killed as hung on
    every attempt, with an empty log: the report said only "run one simulation's command
    by hand", which the user did, and it ran (slowly). It now names the bound to raise."""
    text = report(tmp_path, "timeout", "")
    assert text is not None
    assert "killed as hung" in text and "LauncherTuning(startup_timeout=...)" in text
    assert "worker=True" in text and "systematic_failures=4" in text


def test_other_identical_failures_still_blame_the_solver_or_its_environment(
    tmp_path: Path,
) -> None:
    text = report(tmp_path, 1, "ModuleNotFoundError: No module named 'mysolver'")
    assert text is not None
    assert "The solver or its environment is at fault" in text
    assert "startup_timeout" not in text


def test_the_report_says_when_it_could_be_the_parameters_after_all(tmp_path: Path) -> None:
    """Two parameter sets are all the check sees: a solver that crashes at start-up for
    part of the space only, whose first two draws both lie there, was told flatly "not
    its parameters". The report now says what to do in that case."""
    text = report(tmp_path, 1, "RuntimeError: mesh generation failed")
    assert text is not None
    assert "these 2 parameter sets all lie there" in text
    assert "turn the check off, or raise it, and narrow the parameters' bounds" in text
