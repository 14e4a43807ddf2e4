"""The ledger checker's MISSING lines on a run that missed many samples stay short and
say what is missing (`melissa_trainer.hooks.lineage_words`). A killed run of 200
simulations missed 10048 samples: its line named ten, all of simulation 0 (time steps
50 to 59), then "10038 more", never saying which simulations or steps (321 characters
for nothing); its simulations line listed the first 20 ids seen of 200, cut without a
word. Now: the time steps missing, by the simulations that miss them, as ranges."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_lineage_check import numbered, run_lines, study, write

from melissa_trainer.hooks.lineage_words import MOST_GROUPS, missing_line, spans
from melissa_trainer.lineage import check


def line(report_lines: list[str], start: str) -> str:
    (found,) = [x for x in report_lines if x.startswith(start)]
    return found


@pytest.mark.timeout(60)
def test_a_killed_run_says_its_missing_steps_by_simulation(tmp_path: Path) -> None:
    batches = numbered(study(200, 100, 32))[:312]  # killed after step 312 of 625
    del batches[3]  # simulations 96-127's time step 0
    write(tmp_path / "lineage", 0, run_lines("a.1", 0, batches))
    report = check(tmp_path, simulations=300, steps=100)
    assert not report.ok and len(report.missing) == 10048
    assert line(report.lines, "MISSING: 10048") == (
        "MISSING: 10048 samples never trained on: time steps 50-99 of simulations 0-95, "
        "128-183; time steps 0, 50-99 of simulations 96-127; time steps 49-99 of "
        "simulations 184-199"
    )
    assert line(report.lines, "MISSING: 100 simulations") == (
        "MISSING: 100 simulations never trained on (seen: 0-199)"
    )


@pytest.mark.timeout(60)
def test_scattered_missing_samples_stay_one_short_line(tmp_path: Path) -> None:
    """Every simulation misses steps of its own: at most MOST_GROUPS groups are said,
    each list of ids cut to a few ranges, then how many simulations more."""
    rng = random.Random(0)
    keys = [(s, t) for t in range(100) for s in range(300) if rng.random() > 0.05]
    write(tmp_path / "lineage", 0, run_lines("a.1", 0, numbered([keys]), end=1))
    report = check(tmp_path, steps=100)
    said = line(report.lines, "MISSING:")
    assert said.startswith(f"MISSING: {len(report.missing)} samples never trained on: ")
    assert said.count(" of simulation") == MOST_GROUPS, said
    missing_some = len({s for s, _ in report.missing})  # (a few miss none)
    assert said.endswith(f"; and {missing_some - MOST_GROUPS} simulations more"), said
    assert len(said) < 600, said


def test_few_missing_samples_are_each_named() -> None:
    assert missing_line([(0, 1), (1, 1)]) == (
        "MISSING: 2 samples never trained on: simulation 0 time step 1, simulation 1 time step 1"
    )
    eleven = [(3, t) for t in range(11)]
    assert (
        missing_line(eleven)
        == "MISSING: 11 samples never trained on: time steps 0-10 of simulation 3"
    )
    one_step = [(s, 7) for s in (4, 5, 6, 9, 10, 11, 12, 20, 21, 22, 40)]
    assert missing_line(one_step) == (
        "MISSING: 11 samples never trained on: time step 7 of simulations 4-6, 9-12, 20-22, 40"
    )


def test_spans_are_ranges_cut_after_a_few() -> None:
    assert spans([5, 0, 1, 2, 7, 8, 2]) == "0-2, 5, 7-8"
    assert spans([]) == ""
    assert spans(range(0, 40, 2), most=3) == "0, 2, 4, and 17 more"
