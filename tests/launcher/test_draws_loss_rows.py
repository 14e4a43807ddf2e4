"""draws.csv's ``loss`` rows are bounded (`launcher.draw_log.LOSS_CHANGE`): a loss gets a
row when it is a simulation's first or moved by more than 10% of the last one written;
a resume skips from the last ``loss`` row its file kept, as the killed run would have.

Before, every loss handed to the sampler had a row: the launcher hands it each
simulation's newest loss at every draw, so a study of n simulations whose buffer holds
k of them wrote about n * k rows (96 simulations of the heat example: 2,473 loss rows;
`benchmarks/draws_log_size.py`). The oracle: the rows the rule gives, worked
by hand for a planted sequence of losses.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from melissa_trainer.launcher.draw_log import DrawLog

pytestmark = pytest.mark.timeout(60)


def losses(path: Path) -> list[tuple[int, float]]:
    with path.open(newline="") as file:
        return [(int(r["simulation_id"]), float(r["loss"]))
                for r in csv.DictReader(file) if r["event"] == "loss"]  # fmt: skip


def test_a_loss_gets_a_row_when_it_moved_by_more_than_a_tenth(tmp_path: Path) -> None:
    path = tmp_path / "draws.csv"
    log = DrawLog.open(path, ["x"])
    log.drew(0, {"x": 0.5}, "uniform", None)
    log.drew(1, {"x": 0.7}, "uniform", None)
    # sim 0: 1.0 (first), 1.05 and 1.09 (within 10% of 1.0), 1.2 (20%), 1.21 (1%),
    # 0.5 (down 58%); sim 1: 0.0 (first), 0.0 (same), -0.2 (any move from 0), -0.21 (5%)
    for seen in ({0: 1.0, 1: 0.0}, {0: 1.05, 1: 0.0}, {0: 1.09, 1: -0.2}, {0: 1.2},
                 {0: 1.21, 1: -0.21}, {0: 0.5}):  # fmt: skip
        log.observed(seen)
    log.gave_up(0, "abandoned")
    log.close()
    assert losses(path) == [(0, 1.0), (1, 0.0), (1, -0.2), (0, 1.2), (0, 0.5)]
    with path.open(newline="") as file:
        last = list(csv.reader(file))[-1]
    assert last == ["0", "abandoned", "0.5", "uniform", "", "0.5"]  # the last written


def test_a_resume_skips_from_the_last_loss_row_it_kept(tmp_path: Path) -> None:
    path = tmp_path / "draws.csv"
    log = DrawLog.open(path, ["x"])
    log.drew(0, {"x": 0.5}, "uniform", None)
    log.observed({0: 1.0})
    log.observed({0: 1.2})
    log.drew(1, {"x": 0.7}, "uniform", None)  # after the checkpoint (next_id 1): dropped
    log.close()
    log = DrawLog.open(path, ["x"], {0: {"x": 0.5}}, next_id=1)
    log.observed({0: 1.25})  # within 10% of 1.2, the last kept: no row
    log.observed({0: 1.4})  # 17% above 1.2: a row
    log.close()
    assert losses(path) == [(0, 1.0), (0, 1.2), (0, 1.4)]
