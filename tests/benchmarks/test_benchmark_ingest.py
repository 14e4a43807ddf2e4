"""benchmarks/ingest.py --quick, one case: it runs, and prints its throughput rows and
the CPU row beside them (the figures themselves are not asserted: they are timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "ingest.py"


@pytest.mark.timeout(300)
def test_ingest_benchmark_quick_prints_throughput_and_cpu_rows() -> None:
    args = ["--sizes", "1MB", "--clients", "1", "--no-training", "--no-pinned"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--quick", "--rounds", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=280,
        env=dict(os.environ),
        check=True,
    )
    rows = json.loads(out.stdout.strip().splitlines()[-1])["rows"]
    cases = [r["case"] for r in rows]
    for mode in ("immediate", "next_send", "never"):
        case = f"1 MB x1 client, reuse={mode}"
        assert [c for c in cases if c.startswith(case)] == [
            f"{case} (msgs/s)",
            f"{case} (GB/s)",
            f"{case} (CPU us/msg, receiving threads)",
            f"{case} (minor page faults/msg, receiving process)",
            f"{case} (msgs/s, raw with the same malloc thresholds)",
        ]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        if r["unit"] == "faults/msg":  # (none at all is the aim)
            assert r["ours"] >= 0 and r["baseline"] >= 0
        else:
            assert r["ours"] > 0 and r["baseline"] > 0


@pytest.mark.timeout(300)
def test_ingest_benchmark_runs_one_reuse_mode_without_the_finiteness_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--reuse` picks the array_reuse modes, `--nonfinite accept` turns the receiver's
    check off: the rows say so in their case. The command's `main` in this process
    (what is checked is how it reads these flags; the test above starts the command
    itself, whose start-up imports torch and accelerate: seconds of CPU)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import ingest
    finally:
        sys.path.remove(str(SCRIPT.parent))
    args = ["--sizes", "1MB", "--clients", "1", "--no-training", "--no-pinned"]
    args += ["--reuse", "never", "--nonfinite", "accept"]
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *args, "--quick", "--rounds", "1", "--json"])
    capsys.readouterr()
    ingest.main()
    out = capsys.readouterr().out
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    case = "1 MB x1 client, reuse=never, nonfinite=accept"
    assert [r["case"] for r in rows] == [
        f"{case} (msgs/s)",
        f"{case} (GB/s)",
        f"{case} (CPU us/msg, receiving threads)",
        f"{case} (minor page faults/msg, receiving process)",
        f"{case} (msgs/s, raw with the same malloc thresholds)",
    ]
