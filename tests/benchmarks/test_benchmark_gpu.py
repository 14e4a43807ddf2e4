"""benchmarks/gpu.py: without a GPU it says so and exits 0 with no rows; `--smoke` runs
every case on the CPU (bf16 autocast, a gloo group, the heat example's worker, the
Navier–Stokes example streaming into its FNO at 16^2) and its rows come out well formed.
benchmarks/gpu_check.py, the prepared GPU run: the same, its stages, its budget. No
figure is asserted: they are for a GPU run to give."""

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
    assert "no GPU is present" in out.err and "--smoke runs every case" in out.err
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


@pytest.mark.timeout(120)
def test_keep_going_runs_the_cases_after_one_that_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--keep_going (what gpu_check passes: a device lease is one shot): a failing case's
    traceback on stderr, the next case's row kept, exit status 1; without it the
    failure propagates."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    gpu = _gpu_module()

    def broken(bench):
        raise RuntimeError("the stream ran out")

    monkeypatch.setitem(gpu.CASES, "fno_busy", broken)
    argv = ["--smoke", "--json", "--cases", "fno_busy,stop_flag"]
    assert gpu.main([*argv, "--keep_going"]) == 1
    out = capsys.readouterr()
    rows = json.loads(out.out.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == ["stop flag all-reduce every 8 steps vs none (gloo)"]
    assert "RuntimeError: the stream ran out" in out.err
    assert "case fno_busy failed; going on (--keep_going)" in out.err
    with pytest.raises(RuntimeError, match="the stream ran out"):
        gpu.main(argv)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smoke_runs_every_case_on_cpu(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json"], capture_output=True, text=True,
        timeout=580, env=CPU_ONLY, cwd=tmp_path,
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
        "FNO 16^2 batch 4 bf16: trainer vs hand-written loop",
    ]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
        assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=2e-2)
    # the heat example's worker ran (it trained: else the script fails) and, with no
    # utilisation meter on a CPU, its row is left out
    assert "no GPU utilisation meter: the busy row is left out" in proc.stderr
    # so did the Navier–Stokes example's: its window closed while the simulations
    # streamed (else the worker fails), and its rows are left out for the same reason
    assert "fno_busy: 2 simulations; window " in proc.stderr
    assert "no GPU utilisation meter: the FNO busy rows are left out" in proc.stderr


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


def test_the_fno_busy_rows_hold_ours_alone_and_ours_against_the_hand_loop() -> None:
    _gpu_module()
    import gpu_fno_busy

    window = {"busy": 0.93, "seconds": 60.1, "steps": 6000, "samples_put": 4000}
    got = {"streaming": {"window": window}, "hand": {"busy": 0.98, "steps_per_s": 101.0}}
    alone, against = gpu_fno_busy.busy_rows(got, 256)
    assert alone["case"] == "GPU busy while simulations stream 256^2 into the FNO (vs always)"
    assert (alone["ours"], alone["baseline"], alone["ratio"], alone["target"]) == (
        0.93, 1.0, 0.93, 0.9,
    )  # fmt: skip
    assert against["case"].endswith("vs hand loop (device data)")
    assert (against["ours"], against["baseline"], against["target"]) == (0.93, 0.98, 0.95)
    assert against["ratio"] == pytest.approx(0.93 / 0.98, abs=1e-3)
    got["hand"]["busy"] = None  # no meter: no row
    assert gpu_fno_busy.busy_rows(got, 256) == []


def test_the_fno_hand_loop_trains_the_examples_model_on_device_batches() -> None:
    """The baseline trains (its loss falls on a fixed batch set) the example's FNO on
    batches its `make_process_batch` builds from samples stacked on the device."""
    _gpu_module()
    import gpu_fno
    import torch

    size = gpu_fno.SMOKE
    samples = gpu_fno.make_samples(size)
    loop = gpu_fno.HandLoop(size, samples, torch.device("cpu"), seed=0)
    assert type(loop.model).__name__ == "FNO"
    assert loop.fields["vorticity"].shape == (size.samples, size.grid, size.grid)

    def loss() -> float:
        inputs, target = loop.process_batch(gpu_fno.SimpleNamespace(fields=loop.fields))
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(loop.model(inputs), target))

    before = loss()
    loop.run(30)
    assert loss() < before


CHECK = BENCHMARKS / "gpu_check.py"


def _check_module():
    _gpu_module()
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(BENCHMARKS))
    return gpu_check


def test_the_check_without_a_gpu_says_so_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gpu_check = _check_module()
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    # (a user trial: it said "measures nothing here" and nothing of --smoke)
    assert "no GPU is present" in err and "--smoke runs the same stages" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_the_check_refuses_to_start_without_a_package_the_stages_need(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before any time is spent: the stages' imports checked in a child process (all
    there in this environment), and a missing one named with the fix, exit status 2."""
    gpu_check = _check_module()
    assert gpu_check.preflight(dict(os.environ)) is None
    no_zmq = tmp_path / "no_zmq"
    no_zmq.mkdir()
    (no_zmq / "zmq.py").write_text("raise ModuleNotFoundError(\"No module named 'zmq'\")\n")
    env = {**os.environ, "PYTHONPATH": str(no_zmq)}
    assert gpu_check.preflight(env) == "ModuleNotFoundError: No module named 'zmq'"
    monkeypatch.setenv("PYTHONPATH", str(no_zmq))
    assert gpu_check.main(["--smoke", "--out", str(tmp_path / "out")]) == 2
    assert "a package the stages need is missing" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_stage_out_of_time_is_stopped_and_its_rows_so_far_kept(tmp_path: Path) -> None:
    """A gpu.py cut by the budget: its process group is stopped (a child it started
    too) and the rows it had printed on stderr are the stage's rows."""
    gpu_check = _check_module()
    row = {"case": "c", "ours": 1.0, "baseline": 2.0, "unit": "x", "ratio": 0.5, "target": 1}
    pidfile = tmp_path / "child.pid"
    code = (
        "import json, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        f"print('row: ' + json.dumps({row!r}), file=sys.stderr, flush=True)\n"
        "time.sleep(600)\n"
    )
    stage = gpu_check.run_stage("gpu_new", [sys.executable, "-c", code], tmp_path, timeout=3)
    assert stage["timed_out"] and stage["rc"] != 0
    assert gpu_check.stage_rows(tmp_path, "gpu_new") == [row]
    child = int(pidfile.read_text())

    def alive() -> bool:  # a zombie (killed, not yet reaped) counts as stopped
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state not in ("Z", "X")

    stopped = threading.Event()
    for _ in range(200):  # SIGTERM was sent to the group before run_stage returned
        if not alive():
            stopped.set()
            break
        stopped.wait(0.05)
    assert stopped.is_set(), f"the stage's child {child} outlived it"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_check_runs_its_stages_on_cpu_under_smoke(tmp_path: Path) -> None:
    """gpu_check --smoke: the gpu.py stages and the example (16^2, stopped after 3 s of
    training, then validated against its baselines and plotted); the folder given gets
    three files: summary.json with every row and
    the example's figures, the stages' log, the PNG."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(CHECK), "--smoke", "--cases", "fno,stop_flag",
         "--example_seconds", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=380, env=CPU_ONLY, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [s["stage"] for s in summary["stages"]] == ["gpu_new", "example", "gpu_old"]
    assert all(s["rc"] == 0 and not s["timed_out"] for s in summary["stages"])
    assert [r["case"] for r in summary["rows"]] == [
        "FNO 16^2 batch 4 bf16: trainer vs hand-written loop",
        "stop flag all-reduce every 8 steps vs none (gloo)",
    ]
    example = summary["example"]
    assert example["grid_size"] == 16 and example["steps"] > 0
    assert example["window"]["seconds"] >= 3 or not example["window"]["complete"]
    for key in ("val_mse", "mean_field_mse", "persistence_mse"):
        assert math.isfinite(example[key])
    assert Path(example["plot"]).is_file() and Path(example["plot"]).parent == out
    assert summary["env"]["smoke"] is True
    assert len(summary["env"]["sources_sha256"]) == 64
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu_check.log", "navier_stokes_validation.png", "summary.json",
    ]  # fmt: skip
    log = (out / "gpu_check.log").read_text()
    assert "===== gpu_new.log =====" in log and "===== example.txt =====" in log
    assert "validation MSE" in proc.stdout and f"everything is under {out}" in proc.stdout


def test_the_sources_digest_names_the_code_without_git(tmp_path: Path) -> None:
    """A device machine's copy of the tree may have no .git: `summary.json`'s
    `sources_sha256` then names the code measured. It is the digest of the sources'
    paths and bytes (recomputed here with hashlib, the oracle), and changes with a byte
    of a file or its name."""
    import hashlib

    gpu_check = _check_module()
    (tmp_path / "melissa_trainer" / "core").mkdir(parents=True)
    (tmp_path / "benchmarks").mkdir()
    files = {"benchmarks/gpu.py": b"rows = []\n", "melissa_trainer/core/step.py": b"x = 1\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "notes.txt").write_text("not a source")
    expected = hashlib.sha256()
    for name in sorted(files):
        expected.update(name.encode() + b"\0" + files[name] + b"\0")
    digest = gpu_check.sources_digest(tmp_path)
    assert digest == expected.hexdigest()
    (tmp_path / "melissa_trainer" / "core" / "step.py").write_bytes(b"x = 2\n")
    assert gpu_check.sources_digest(tmp_path) != digest
    assert len(gpu_check.sources_digest()) == 64  # the repository's own


@pytest.mark.parametrize("script", ["gpu", "gpu_check"])
def test_help_describes_the_command_in_whole_sentences(
    script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--help's description is the docstring's first paragraph, not its first line (a
    user trial: both stopped mid-sentence)."""
    module = _gpu_module() if script == "gpu" else _check_module()
    with pytest.raises(SystemExit) as info:
        module.main(["--help"])
    assert info.value.code == 0
    description = " ".join(capsys.readouterr().out.split("\n\n")[1].split())
    # whole sentences: both docstrings' first sentence ends on their second line
    assert description.startswith("The ") and description.endswith("."), description
    assert "minutes" in description, description
