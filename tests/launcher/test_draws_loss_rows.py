"""draws.csv's ``loss`` rows are bounded (`launcher.loss_rows`): a loss gets a row when
it is a simulation's first or moved by more than 10% of the last one written, and, once
it swung back and forth, no sooner than a gap of draws doubled at each swing (a held
loss written when the file closes); a resume goes on from the rows its file kept, as
the killed run would have.

Before, every loss handed to the sampler had a row: the launcher hands it each
simulation's newest loss at every draw, so a study of n simulations whose buffer holds
k of them wrote about n * k rows (96 simulations of the heat example: 2,473 loss rows;
`benchmarks/draws_log_size.py`); with the 10% skip alone, a loss swinging by more than
10% still got a row at every draw. The oracle: the rows the rule gives, worked by hand
for planted sequences of losses, and an uninterrupted run's rows for a resume.
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


def swing(log: DrawLog, draws: range) -> None:
    """Simulation 0's loss swinging between 1.0 and 2.0 (100% and 50% moves) at each
    draw of the simulations `draws` (as the launcher hands the sampler its newest loss)."""
    for i in draws:
        log.drew(i, {"x": 0.5}, "uniform", None)
        log.observed({0: 1.0 if i % 2 else 2.0})


def test_a_swinging_loss_gets_rows_ever_further_apart(tmp_path: Path) -> None:
    """Failed before: a loss swinging by more than 10% got a row at every draw (12 here;
    a study of n simulations, about n * n / 2). The rows worked by hand (`loss_rows`):
    after its s-th swing a row waits 2 ** (s - 1) draws; a held loss is dropped when a
    newer one is back within 10% of the last row, and written as the file closes."""
    path = tmp_path / "draws.csv"
    log = DrawLog.open(path, ["x"])
    log.drew(0, {"x": 0.5}, "uniform", None)
    swing(log, range(1, 13))
    # draws 1, 2: the first, then a move up (no swing yet); 3: the first swing (waits 1
    # draw); 4: held (the 2nd swing waits 2), 5 back to the last row's, dropped; 6: the
    # 2nd swing; 7 to 10: held then dropped (4 draws); 11: the 3rd swing; 12: held
    assert [loss for _, loss in losses(path)] == [1.0, 2.0, 1.0, 2.0, 1.0]
    log.close()  # the held 2.0: the last row is the newest loss the sampler was handed
    assert [loss for _, loss in losses(path)] == [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]


def test_swinging_losses_of_a_study_grow_as_n_log_n(tmp_path: Path) -> None:
    # 64 simulations, each draw handing every one drawn so far its swinging loss: before,
    # 64 * 65 / 2 = 2,080 rows
    path = tmp_path / "draws.csv"
    log = DrawLog.open(path, ["x"])
    for i in range(64):
        log.drew(i, {"x": 0.5}, "uniform", None)
        log.observed({sid: 1.0 if (i + sid) % 2 else 2.0 for sid in range(i + 1)})
    log.close()
    rows = losses(path)
    # each: its first row, its first move, a swing per doubling of the draws since, the close
    assert len(rows) <= 64 * (2 + 7 + 1), len(rows)
    newest = {sid: 1.0 if (63 + sid) % 2 else 2.0 for sid in range(64)}
    assert {sid: loss for sid, loss in rows} == newest  # (each one's last row)


def test_a_resume_goes_on_with_the_rows_of_an_uninterrupted_run(tmp_path: Path) -> None:
    whole = DrawLog.open(tmp_path / "whole.csv", ["x"])
    whole.drew(0, {"x": 0.5}, "uniform", None)
    swing(whole, range(1, 13))
    killed = DrawLog.open(tmp_path / "draws.csv", ["x"])
    killed.drew(0, {"x": 0.5}, "uniform", None)
    swing(killed, range(1, 7))  # (nothing held after draw 6: its swing got its row)
    rows = killed.rows  # (its checkpoint)
    saved = {i: {"x": 0.5} for i in range(7)}
    resumed = DrawLog.open(tmp_path / "draws.csv", ["x"], saved, next_id=7, rows=rows)
    swing(resumed, range(7, 13))
    assert losses(tmp_path / "draws.csv") == losses(tmp_path / "whole.csv")
    for log in (whole, killed, resumed):
        log.close()
