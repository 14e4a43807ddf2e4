"""The ledger checker's `note:` when the study's record was read but does not name the
simulations whose last steps are missing: the newest checkpoint may predate their
give-up (a run killed before its next save). docs/how-to/preemption.md promised the
note; before, only a missing record gave one, and a record from before the give-up left
the MISSING lines unexplained (found by the review of 2026-12-06)."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.hooks import lineage_given_up
from melissa_trainer.hooks.lineage_given_up import GivenUp, set_aside

pytestmark = pytest.mark.timeout(60)


def record(monkeypatch: pytest.MonkeyPatch, simulations: dict[int, list[int | str]]) -> Path:
    source = Path("out/checkpoints/checkpoint-4/rank_0/source.json")
    monkeypatch.setattr(
        lineage_given_up, "read_given_up", lambda output_dir: GivenUp(simulations, source)
    )
    return source


def test_a_record_naming_no_give_up_notes_the_missing_last_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = record(monkeypatch, {})
    seen = [(s, t) for s in (0, 1, 2) for t in range(3)] + [(0, 3), (1, 3)]
    missing = [(2, 3)]
    lines: list[str] = []
    rest, absent = set_aside(missing, seen, 0, Path("out"), lines)
    assert (rest, absent) == ([(2, 3)], 0)  # (still a violation: the record cannot say)
    (line,) = lines
    assert line.startswith(f"note: the study's record ({source}) names no given-up")
    assert "(simulation 2)" in line and "--steps FILE" in line


def test_a_simulation_never_trained_on_and_not_in_the_record_is_noted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record(monkeypatch, {5: [3]})
    lines: list[str] = []
    rest, absent = set_aside([], [(0, 0)], 2, Path("out"), lines)
    assert (rest, absent) == ([], 1)  # (5, never trained on, given up: the other is not)
    assert lines[0].startswith("GIVEN UP: simulation 5 ")
    assert "a simulation never trained on" in lines[1]


def test_only_a_gap_before_the_last_step_trained_gets_no_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gap inside what a simulation sent is no give-up's: nothing to note."""
    record(monkeypatch, {})
    lines: list[str] = []
    rest, _ = set_aside([(0, 1)], [(0, 0), (0, 2)], 0, Path("out"), lines)
    assert rest == [(0, 1)] and lines == []


def test_a_record_naming_every_missing_tail_adds_no_note(monkeypatch: pytest.MonkeyPatch) -> None:
    record(monkeypatch, {2: [3, 3]})
    lines: list[str] = []
    rest, _ = set_aside([(2, 3), (2, 4)], [(2, 0), (2, 1), (2, 2)], 0, Path("out"), lines)
    assert rest == [] and len(lines) == 1 and lines[0].startswith("GIVEN UP: simulation 2 ")
