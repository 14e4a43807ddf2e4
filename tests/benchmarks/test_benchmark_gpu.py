"""benchmarks/gpu.py: without a GPU it says so and exits 0 with no rows; `--smoke` runs
every case on the CPU (bf16 autocast, a gloo group, the heat example's worker) and its
rows come out well formed. No figure is asserted: they are for a GPU run to give."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "gpu.py"
CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}


def _gpu_module():  # benchmarks/ is not a package
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import gpu
    finally:
        sys.path.remove(str(BENCHMARKS))
    return gpu


@pytest.mark.timeout(120)
def test_without_a_gpu_it_says_so_and_exits_0_without_rows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's `main` in this process (the smoke test below starts the command
    itself), with torch seeing no GPU, as ``CUDA_VISIBLE_DEVICES=""`` makes it."""
    gpu = _gpu_module()
    monkeypatch.setattr(gpu.torch.cuda, "is_available", lambda: False)
    capsys.readouterr()
    assert gpu.main(["--json"]) == 0
    out = capsys.readouterr()
    assert "no GPU is present" in out.err
    assert json.loads(out.out.strip().splitlines()[-1]) == {"rows": []}


@pytest.mark.timeout(120)
def test_cases_picks_the_rows_and_refuses_an_unknown_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # what --smoke sets: restored after
    gpu = _gpu_module()
    with pytest.raises(SystemExit):
        gpu.main(["--smoke", "--cases", "hand,warp"])
    assert "--cases: unknown warp; choose among hand, staging" in capsys.readouterr().err
    assert gpu.main(["--smoke", "--json", "--cases", "stop_flag"]) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == ["stop flag all-reduce every 8 steps vs none (gloo)"]
    assert out.err.count("row: ") == 1  # each row on stderr as it comes


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_smoke_runs_every_case_on_cpu(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json"], capture_output=True, text=True,
        timeout=400, env=CPU_ONLY, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [
        "trainer vs hand-written CUDA loop (bf16)",
        "staging+prefetch vs plain send_to_device",
        "device-resident buffer vs host buffer (1 KB samples)",
        "stop flag all-reduce every 8 steps vs none (gloo)",
        "torch_compile + CUDA graphs + fused Adam vs eager (trainer)",
        "torch.compile + CUDA graphs + fused Adam vs eager (hand loop)",
    ]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
        assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=2e-2)
    # the heat example's worker ran (it trained: else the script fails) and, with no
    # utilisation meter on a CPU, its row is left out
    assert "no GPU utilisation meter" in proc.stderr


@pytest.mark.timeout(240)
def test_the_compile_cases_compile_the_step_under_smoke(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--smoke: ours compiles (aot_eager, the CPU's stand-in for CUDA graphs), the
    baseline does not; both rows come out well formed."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    gpu = _gpu_module()
    import gpu_compile

    made: list[dict] = []
    run_trainer = gpu_compile.run_trainer

    def recording(*args, **kw):  # the compile options each trainer was given
        made.append(args[-1])
        return run_trainer(*args, **kw)

    monkeypatch.setattr(gpu_compile, "run_trainer", recording)
    assert gpu.main(["--smoke", "--json", "--cases", "compile,compile_hand"]) == 0
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]
    assert [r["case"].split(" vs ")[1] for r in rows] == [
        "eager (trainer)",
        "eager (hand loop)",
    ]
    assert made == [{"torch_compile_backend": "aot_eager"}, None]  # ours, then the baseline
    assert all(r["ours"] > 0 and r["baseline"] > 0 and r["target"] == 3.0 for r in rows)


def test_busy_is_the_mean_utilisation_inside_the_window() -> None:
    gpu = _gpu_module()
    import torch

    assert gpu.utilisation_meter(torch.device("cpu")) is None
    readings = iter([50.0, 100.0, 100.0] + [0.0] * 1000)
    enough = threading.Event()
    calls = []

    def meter() -> float:
        calls.append(1)
        if len(calls) == 3:
            enough.set()
        return next(readings)

    sampler = gpu.Sampler(meter)
    assert enough.wait(30)
    sampler.stop()
    (t0, u0), (t1, _), (t2, _) = sampler.samples[:3]
    assert u0 == 50.0
    assert sampler.busy(t1, t2) == pytest.approx(1.0)  # the two 100 % readings
    assert sampler.busy(t0, t2) == pytest.approx(250 / 300)
    assert sampler.busy(t2 + 1e6, t2 + 2e6) is None  # nothing sampled in the window
