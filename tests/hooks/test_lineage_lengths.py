"""`python -m melissa_trainer.lineage check --steps` for simulations of different lengths
(a user trial: ``--steps S`` assumes every simulation runs S steps, so a study whose
simulations ran 4 and 2 steps reported the short one's steps 2-3 missing, whatever S).
Now ``--steps FILE`` gives each simulation's length (a JSON object) and ``--steps seen``
checks each simulation up to its last step seen; ``--steps S`` is unchanged. Failed
before the change (neither form was accepted: exit status 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_lineage_check import numbered, run_lines, write

from melissa_trainer.lineage import check, main

#: simulation 0 runs 4 steps, simulation 7 (a replacement's id) 2
KEYS = [(0, 0), (7, 0), (0, 1), (7, 1), (0, 2), (0, 3)]


def ledger(folder: Path, keys: list[tuple[int, int]]) -> None:
    """One run, one rank, fifo: `keys` two by two, the run ended."""
    batches = [keys[i : i + 2] for i in range(0, len(keys), 2)]
    write(folder, 0, run_lines("a.1", 0, numbered(batches), end=len(batches)))


def lengths(folder: Path, of: dict[int, int]) -> str:
    path = folder / "lengths.json"
    path.write_text(json.dumps({str(s): n for s, n in of.items()}))
    return str(path)


def test_a_lengths_file_checks_each_simulation_to_its_own_length(
    tmp_path: Path, capsys: Any
) -> None:
    ledger(tmp_path / "out", KEYS)
    file = lengths(tmp_path, {0: 4, 7: 2})
    assert main(["check", str(tmp_path / "out"), "--simulations", "2", "--steps", file]) == 0
    said = capsys.readouterr().out
    assert "missing: none" in said and "EXACTLY ONCE: OK" in said, said
    # one length for all is still one length for all: simulation 7 lacks steps 2-3
    assert main(["check", str(tmp_path / "out"), "--simulations", "2", "--steps", "4"]) == 1
    assert "MISSING: 2 samples never trained on: simulation 7 time step 2, simulation 7 " in (
        capsys.readouterr().out
    )


def test_a_lengths_file_finds_a_short_simulation_and_one_never_seen(tmp_path: Path) -> None:
    ledger(tmp_path / "out", KEYS[:-1])  # (simulation 0's step 3 never trained on)
    report = check(tmp_path / "out", steps={0: 4, 7: 2, 9: 1})
    assert not report.ok
    assert report.missing == [(0, 3), (9, 0)], report.missing


def test_steps_seen_finds_gaps_up_to_each_last_step(tmp_path: Path, capsys: Any) -> None:
    ledger(tmp_path / "out", KEYS)
    assert main(["check", str(tmp_path / "out"), "--steps", "seen"]) == 0
    assert "(--steps seen)" in capsys.readouterr().out
    gap = tmp_path / "gap"
    ledger(gap, [k for k in KEYS if k != (0, 1)])
    report = check(gap, steps="seen")
    assert not report.ok and report.missing == [(0, 1)], report.missing


def test_a_simulation_the_file_does_not_name_is_checked_as_seen_and_said(
    tmp_path: Path,
) -> None:
    ledger(tmp_path / "out", [k for k in KEYS if k != (7, 0)])
    report = check(tmp_path / "out", steps={0: 4})
    assert report.missing == [(7, 0)], report.missing
    assert any("simulation seen that --steps does not name" in line for line in report.lines)


def test_a_bad_steps_value_names_the_three_forms(tmp_path: Path, capsys: Any) -> None:
    ledger(tmp_path / "out", KEYS)
    try:
        main(["check", str(tmp_path / "out"), "--steps", str(tmp_path / "none.json")])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("a --steps that is no number, no 'seen', no file was taken")
    said = capsys.readouterr().err
    assert 'expected a number S, "seen", or a JSON file {"SIMULATION_ID": STEPS' in said, said


@pytest.mark.parametrize("length", [1.5, -1, "4", True])
def test_a_length_that_is_no_whole_number_is_refused(
    tmp_path: Path, capsys: Any, length: object
) -> None:
    """Not read as another length (before, 1.5 was taken as 1 and "4" as 4, silently)."""
    ledger(tmp_path / "out", KEYS)
    file = tmp_path / "lengths.json"
    file.write_text(json.dumps({"0": 4, "1": length}))
    with pytest.raises(SystemExit) as info:
        main(["check", str(tmp_path / "out"), "--steps", str(file)])
    assert info.value.code == 2
    said = capsys.readouterr().err
    assert f"the length {length!r} is not a whole number of time steps >= 0" in said, said


@pytest.mark.parametrize("steps", ["0", "-3"])
def test_a_number_of_steps_below_one_is_refused(tmp_path: Path, capsys: Any, steps: str) -> None:
    """Before, ``--steps 0`` and ``--steps -3`` looked for nothing and said "missing: none",
    "EXACTLY ONCE: OK" (user trial htrial21)."""
    ledger(tmp_path / "out", KEYS)
    with pytest.raises(SystemExit) as info:
        main(["check", str(tmp_path / "out"), "--steps", steps])
    assert info.value.code == 2
    assert "give a number of steps >= 1" in capsys.readouterr().err


def test_simulations_alone_says_no_missing_sample_was_looked_for(tmp_path: Path) -> None:
    """Before, ``--simulations N`` alone said "EXACTLY ONCE: OK" with no word that no
    missing sample was looked for."""
    ledger(tmp_path / "out", KEYS)
    said = str(check(tmp_path / "out", simulations=len({s for s, _ in KEYS})))
    assert "(no missing samples looked for: give --steps S, a lengths FILE or seen" in said
