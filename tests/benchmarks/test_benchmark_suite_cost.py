"""benchmarks/suite_cost.py on a tiny suite of its own: a test that starts one Python
process importing torch and one importing nothing. The oracle is what that test
starts, not the script's own accounting: each process logged once, in its class, with
its test's name; the rows well formed. No speed is asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "suite_cost.py"

TINY_SUITE = """
import subprocess, sys

def test_starts_two_interpreters():
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="the machine's CPU comes from /proc/stat")
def test_every_process_of_a_tiny_suite_is_logged_in_its_class(tmp_path: Path) -> None:
    suite = tmp_path / "test_tiny.py"
    suite.write_text(TINY_SUITE)
    log = tmp_path / "cost.jsonl"
    command = [sys.executable, str(BENCHMARK), "--log", str(log), "--repeats", "1", "--json",
               "--", str(suite), "-n", "0", "--rootdir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    records = [json.loads(line) for line in log.read_text().splitlines()]
    test_id = f"{suite.name}::test_starts_two_interpreters"
    started = [r for r in records if r["test"].endswith(test_id)]
    assert sorted((r["argv"], r["torch"]) for r in started) == [
        (["-c"], False),
        (["-c"], True),
    ]
    assert all(r["cpu"] > 0 and not r["accelerate"] for r in started)
    # pytest itself exits with no test current
    assert [r for r in records if r not in started and r["test"]] == []

    rows = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [
        "suite start-up floor vs 5 min on 2 cores",
        "suite busy CPU vs 5 min on 2 cores",
    ]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        assert r["baseline"] == 600 and r["unit"] == "CPU-s" and r["target"] == 1.0
        assert math.isfinite(r["ours"]) and r["ours"] > 0, r
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01), r
    # the report names both classes the tiny test started, with one process each
    assert "torch          1 processes" in done.stderr
    assert test_id in done.stderr


@pytest.mark.timeout(60)
def test_the_probe_records_only_its_own_run_and_keeps_the_exit_status(tmp_path: Path) -> None:
    """The probe module as the ``.pth`` line imports it: with no run named, or another
    run's token, it writes nothing; with its own, one line; the process's exit status
    is its own each time."""
    sys.path.insert(0, str(BENCHMARK.parent))
    try:
        import suite_cost
    finally:
        sys.path.remove(str(BENCHMARK.parent))
    (tmp_path / "probe_mine.py").write_text(suite_cost.PROBE.format(token="mine"))
    log = tmp_path / "cost.jsonl"
    code = "import probe_mine; import json; raise SystemExit(3)"
    for run in (None, f"theirs:{log}", f"mine:{log}"):
        env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
        if run is not None:
            env["SUITE_COST_RUN"] = run
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        assert done.returncode == 3 and done.stderr == ""
        assert log.exists() == (run == f"mine:{log}")
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["argv"] == ["-c"] and record["cpu"] > 0 and record["test"] == ""
    assert not record["torch"] and not record["accelerate"]
    # a process it cannot describe (here sys.argv gone) is still counted, as an error
    broken = "import probe_mine, sys; sys.argv = None; raise SystemExit(4)"
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "SUITE_COST_RUN": f"mine:{log}"}
    done = subprocess.run([sys.executable, "-c", broken], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert done.returncode == 4 and done.stderr == ""
    assert json.loads(log.read_text().splitlines()[-1]) == {"error": "TypeError"}
