"""``draws.csv`` (`launcher.draw_log`) across a resume is cut where the checkpoint was
taken (its ``draw_rows``), whatever the later rows' kind; and every simulation given up
for good has its row, the one that fails the study too.

Before: a resume cut the file by simulation id only (rows of ids >= the checkpoint's
`next_id` dropped), so the rows a killed run wrote after its checkpoint about the
simulations that checkpoint holds stayed: a simulation running at the checkpoint and
redrawn before the kill ran again after the resume, its last row still ``redrawn``;
the losses observed after the checkpoint were written twice. And the simulation whose
abandonment failed the study (past `min_finished_fraction`) had no ``abandoned`` row,
the one failing it under ``on_failure="raise"`` (or its redraws used up) no row at all.

The oracles: the study record's own statuses and parameters, and the file's rows as
they were, read when the checkpoint was taken.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from launcher_said import one_line

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.draw_log import DrawLog
from melissa_trainer.launcher.study_record import StudyRecord

pytestmark = pytest.mark.timeout(60)


def read(path: Path) -> list[list[str]]:
    with path.open(newline="") as file:
        return list(csv.reader(file))


def study(kind: str = "uniform", n: int = 3, **policy: Any) -> StudyRecord:
    record = StudyRecord(
        make_sampler(kind, {"a": (0.0, 1.0)}, seed=0),
        n,
        max_restarts=0,
        on_failure=policy.pop("on_failure", "redraw"),
        max_redraws=policy.pop("max_redraws", 3),
        first_simulation_id=0,
        **policy,
    )
    record.data_reported = False  # (exit 0: finished)
    return record


def resume(state: dict[str, Any], path: Path, kind: str = "uniform") -> StudyRecord:
    """What `Launcher.load_state_dict` then `start` do with the record and the file."""
    resumed = study(kind)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    resumed.reconcile([])
    saved = {sid: r.parameters for sid, r in resumed.records.items()}
    resumed.draw_log = DrawLog.open(path, ["a"], saved, resumed.next_id, resumed.draw_rows)
    return resumed


def last_rows(path: Path) -> dict[int, list[str]]:
    """``drop_duplicates("simulation_id", keep="last")``."""
    return {int(row[0]): row for row in read(path)[1:]}


def test_a_redraw_after_the_checkpoint_is_cut_with_the_replacements_draw(
    tmp_path: Path,
) -> None:
    path = tmp_path / "draws.csv"
    first = study()
    first.draw_log = DrawLog.open(path, ["a"])
    assert [first.take(0.0) for _ in range(3)] == [0, 1, 2]
    state = first.state_dict()  # the checkpoint: 1 running
    at_checkpoint = read(path)
    assert first.process_ended(1, 1.0, 1) == "redraw"  # after it: 1 redrawn as 3...
    assert first.take(2.0) == 3
    with path.open("a") as file:  # ...then killed as it wrote a row
        file.write("3,los")
    first.draw_log.close()

    resumed = resume(state, path)
    assert read(path) == at_checkpoint  # the checkpoint's rows, nothing later
    assert resumed.records[1].status == "pending"  # 1 runs again (0 and 2 too)
    for sid in [resumed.take(3.0) for _ in range(3)]:
        assert resumed.process_ended(sid, 4.0, 0) == "finished"
    assert resumed.done and resumed.next_id == 3
    last = last_rows(path)
    assert sorted(last) == sorted(resumed.records)  # (no row of the discarded 3)
    for sid, row in last.items():
        assert row[1] == "draw", row  # none given up in the study that ran
        assert float(row[2]) == resumed.records[sid].parameters["a"], row


def test_losses_observed_after_the_checkpoint_are_written_once(tmp_path: Path) -> None:
    path = tmp_path / "draws.csv"
    first = study("breed", n=4)
    first.draw_log = DrawLog.open(path, ["a"])
    assert [first.take(0.0) for _ in range(2)] == [0, 1]
    first.observe({0: 2.0})
    state = first.state_dict()  # (applies the loss: its row is the checkpoint's)
    first.observe({1: 3.0})
    first.apply_observations()  # written after the checkpoint, then killed
    first.draw_log.close()
    events = [["0", "draw"], ["1", "draw"], ["0", "loss"], ["1", "loss"]]
    assert [r[:2] for r in read(path)[1:]] == events

    resumed = resume(state, path, "breed")
    resumed.observe({1: 3.0})  # the resumed run's report of the same loss
    resumed.apply_observations()
    assert [r[:2] for r in read(path)[1:]] == events  # 1's loss once, the resumed run's


def test_a_checkpoint_saved_before_it_counted_rows_keeps_the_draws_it_holds(
    tmp_path: Path,
) -> None:
    path = tmp_path / "draws.csv"
    first = study()
    first.draw_log = DrawLog.open(path, ["a"])
    first.take(0.0)
    state = first.state_dict()
    del state["draw_rows"]  # (as saved before the field)
    first.take(1.0)  # a draw after it, then killed
    first.draw_log.close()
    resume(state, path)
    assert [r[:2] for r in read(path)[1:]] == [["0", "draw"]]


@pytest.mark.parametrize(
    ("policy", "event"),
    [
        ({"on_failure": "abandon"}, "abandoned"),  # past min_finished_fraction
        ({"on_failure": "raise"}, "failed"),
        ({"on_failure": "redraw", "max_redraws": 0}, "failed"),
    ],
)
def test_the_simulation_that_fails_the_study_has_its_row(
    tmp_path: Path, policy: dict[str, Any], event: str
) -> None:
    path = tmp_path / "draws.csv"
    record = study(n=4, min_finished_fraction=0.75, **policy)  # (one may be given up)
    record.draw_log = DrawLog.open(path, ["a"])
    ids = [record.take(0.0) for _ in range(4)]
    outcomes = [record.process_ended(sid, 1.0, 1) for sid in ids[:2]]
    assert outcomes[-1] == "raise", outcomes
    last = last_rows(path)
    statuses = {sid: r.status for sid, r in record.records.items()}
    for sid, status in statuses.items():  # each given up has its row, as its status says
        expected = {"abandoned": "abandoned", "failed": "failed"}.get(status, "draw")
        if status == "failed" and sid not in record.not_replaced_ids:
            expected = "redrawn"
        assert last[sid][1] == expected, (sid, status, last[sid])
    assert last[ids[1]][1] == event


def test_rows_lost_before_the_count_are_said_and_their_draws_written_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "draws.csv"
    first = study()
    first.draw_log = DrawLog.open(path, ["a"])
    first.take(0.0), first.take(0.0)
    state = first.state_dict()  # 2 rows
    first.draw_log.close()
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]))  # the second row lost (a machine's crash)
    with caplog.at_level("WARNING", logger="melissa_trainer.launcher"):
        resume(state, path)
    assert "holds 1 whole row of the 2 that the checkpoint counted" in one_line(caplog.text)
    assert [r[:4] for r in read(path)[1:]] == [
        ["0", "draw", repr(first.records[0].parameters["a"]), "uniform"],
        ["1", "draw", repr(first.records[1].parameters["a"]), "unrecorded"],
    ]


def test_a_negative_row_count_is_refused_by_name() -> None:
    state = study().state_dict()
    state["draw_rows"] = -1
    with pytest.raises(ValueError, match="draw_rows=-1 is negative"):
        study().load_state_dict(state)
