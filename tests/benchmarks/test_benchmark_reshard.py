"""benchmarks/reshard.py --quick: it runs (a small checkpoint written by 2 ranks, loaded
on 2 and on 3 simulated ranks, every sample loaded: the benchmark checks it) and gives
its rows well formed. No speed is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "reshard.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_quick_json_gives_every_row_well_formed(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=160, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    rows = out["rows"]
    assert len(rows) == 2
    assert rows[0]["case"].startswith("load ") and rows[0]["target"] == pytest.approx(1 / 1.5, 1e-3)
    assert rows[1]["target"] is None
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["unit"] == "s"
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01, abs=0.002), r
    setup = out["setup"]
    assert setup["rounds"] == 1 and set(setup["slowest_s"]) == {"2", "3"}
    assert list(tmp_path.iterdir()) == []  # the checkpoint is removed


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_dir_is_created_if_missing_as_help_says(tmp_path: Path) -> None:
    """``--dir`` names a folder that does not exist yet: --help promises it is created
    (before: a FileNotFoundError traceback from `tempfile`)."""
    where = tmp_path / "not" / "yet"
    help_text = subprocess.run([sys.executable, str(BENCHMARK), "--help"], capture_output=True,
                               text=True, timeout=60, check=False).stdout  # fmt: skip
    assert "created, with its parents, if missing" in " ".join(help_text.split())
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--dir", str(where)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=160, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(json.loads(done.stdout)["rows"]) == 2
    assert where.is_dir() and list(where.iterdir()) == []  # its checkpoint removed


@pytest.mark.timeout(60)
def test_a_dir_that_cannot_be_one_is_an_error_naming_the_flag(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for given, said in [
        (a_file, f"argument --dir: '{a_file}' is a file, not a directory: give a directory"),
        (a_file / "sub", f"argument --dir: cannot create '{a_file / 'sub'}': Not a directory"),
    ]:
        command = [sys.executable, str(BENCHMARK), "--quick", "--dir", str(given)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=50, check=False)
        assert done.returncode == 2, done.stderr[-3000:]  # argparse's error, no traceback
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
