"""benchmarks/draws_log_size.py (the figures of docs/concepts/study.md "See what it
drew"): its replay of a file through the library's rule, on a planted file, its planted
swinging loss, and ``--quick`` end to end (a real study of 12 simulations with every
loss written). No size is asserted but that the rule keeps no more than the file had:
the figures are for people to read."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_json import ROW_KEYS, benchmark_module, json_rows


def test_the_replay_keeps_the_rows_the_rule_keeps(tmp_path: Path) -> None:
    path = tmp_path / "draws.csv"
    path.write_bytes(  # (as the library's csv.writer ends its lines: \r\n)
        b"simulation_id,event,x,drawn,parent,loss\r\n"
        b"0,draw,0.5,uniform,,\r\n"
        b"0,loss,0.5,uniform,,1.0\r\n"
        b"0,loss,0.5,uniform,,1.05\r\n"  # within 10% of 1.0: skipped
        b"0,loss,0.5,uniform,,1.2\r\n"
        b"0,redrawn,0.5,uniform,,1.2\r\n"
    )
    got = benchmark_module("draws_log_size").measure(path)
    assert (got["draws"], got["loss_rows"], got["loss_rows_ten"]) == (1, 3, 2)
    assert got["loss_rows_kept"] == 2  # (the library's `DrawLog` replayed: no swing here)
    assert got["bytes"] - got["bytes_kept"] == len("0,loss,0.5,uniform,,1.05\r\n")


def test_the_swinging_case_is_every_loss_for_the_ten_percent_skip() -> None:
    got = benchmark_module("draws_log_size").swinging(12)
    # 12 draws, each handing every simulation drawn so far a loss 100% or 50% off its last
    assert (got["draws"], got["loss_rows"], got["loss_rows_ten"]) == (12, 78, 78)
    assert 12 <= got["loss_rows_kept"] < 78


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_quick_measures_a_real_study() -> None:
    rows = json_rows("draws_log_size.py", "--quick", timeout=280)
    assert [r["case"] for r in rows] == [
        "draws.csv loss rows, 12 simulations",
        "draws.csv bytes, 12 simulations",
        "draws.csv loss rows vs the 10% skip alone, 12 simulations",
        "draws.csv loss rows vs the 10% skip alone, swinging loss, 12 simulations",
    ]
    for row in rows:
        assert set(row) >= ROW_KEYS
        assert 0 < row["ours"] <= row["baseline"]
