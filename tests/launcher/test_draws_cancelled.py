"""A study resumed with fewer simulations than its checkpoint cancels the unfinished
ones past the new end (`StudyRecordState.cancel_past_the_end`): each gets a
``cancelled`` row in ``{study_dir}/draws.csv`` (`launcher.draw_log`) as the resumed
launcher starts, so the file's last row of each simulation says what became of it.

Failed before: a cancelled simulation's last row stayed ``draw``, so
``drop_duplicates("simulation_id", keep="last")`` (the documented way to read the file)
listed it as drawn, while the resumed study had forgotten it. The oracle: the resumed
launcher's own statuses (`Launcher.outcomes`) and the simulations' launches.
"""

from __future__ import annotations

import csv
import json
import logging
import sys
from pathlib import Path

import pytest
from launcher_runs import command, launcher, run_study, runs
from launcher_said import one_line, too_long
from waiting import wait_until

from melissa_trainer.launcher import Launcher, make_sampler

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")


def last_events(path: Path) -> dict[int, str]:
    """Each simulation's last row's event: what the file says became of it."""
    with path.open(newline="") as file:
        rows = list(csv.reader(file))[1:]
    return {int(row[0]): row[1] for row in rows}


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_the_simulations_a_smaller_resume_cancels_get_a_cancelled_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")

    def make(n: int) -> Launcher:
        sampler = make_sampler("uniform", {"x": (0, 1)}, seed=4)
        return launcher(command(tmp_path, "hang", hang=[2]), n, sampler, job_limit=1)

    first = make(5)
    first.start(tmp_path / "rendezvous")
    try:  # (0 and 1 finished, 2 running: hung, one after the other)
        wait_until(lambda: len(runs(tmp_path)) == 3, "simulation 2 to hang", 60.0)
        state = json.loads(json.dumps(first.state_dict()))
    finally:
        first.stop()
    path = tmp_path / "draws.csv"
    assert last_events(path) == {0: "draw", 1: "draw", 2: "draw"}
    second = make(2)  # (0 and 1 finished: the study is whole, 2 is cancelled)
    second.load_state_dict(state)
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
        statuses = {o.simulation_id: o.status for o in second.outcomes()}
    finally:
        second.stop()
    assert statuses == {0: "finished", 1: "finished"}, statuses
    assert sorted(sid for sid, _, _ in runs(tmp_path)) == [0, 1, 2]  # (2 not again)
    events = last_events(path)
    # every simulation the resumed study knows ends as it recorded it; the others cancelled
    assert {sid: e for sid, e in events.items() if sid in statuses} == {0: "draw", 1: "draw"}
    assert {sid: e for sid, e in events.items() if sid not in statuses} == {2: "cancelled"}
    # said once, cut at 100 columns (log_lines.inform; failed before: one line of 112)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resume: ")]
    assert len(said) == 1 and too_long(said[0]) == [], said
    assert one_line(said[0]) == (
        "resume: n_simulations=2 is fewer than the study's record: simulation [2], "
        "unfinished, is cancelled (not run again, not counted as failed)"
    ), said
