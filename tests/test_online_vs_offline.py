"""benchmarks/online_vs_offline.py: its two pipelines on the heat solver, tiny, in this
process (the same simulations, each step streamed once, offline's files and epochs, a
time budget that stops both), and the command itself end to end."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import heat_offline as off  # noqa: E402
import heat_pipelines as hp  # noqa: E402
import online_vs_offline as bench  # noqa: E402
from solver import check_parameters, solve  # noqa: E402  (heat_pipelines put it on the path)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

SETUP = hp.Setup(grid_size=8, time_steps=10, hidden=32, buffer_size=100, watermark=20,
                 n_validation=2)  # fmt: skip
N = 4


@pytest.fixture(scope="module")
def validation():
    return hp.validation_set(SETUP)


@pytest.mark.timeout(60)
def test_solver_saves_a_run_with_its_parameters(tmp_path):
    parameters = dict(hp.design(SETUP, 1)[0])
    path = tmp_path / "run.npy"
    command = [sys.executable, str(hp.SOLVER), *SETUP.config.argv(), "--save_npy", str(path),
               "--parameters", json.dumps(parameters)]  # fmt: skip
    subprocess.run(command, check=True, timeout=30)
    fields = np.load(path)
    assert fields.shape == (SETUP.time_steps, SETUP.grid_size, SETUP.grid_size)
    np.testing.assert_array_equal(fields, np.stack(list(solve(parameters, SETUP.config))))
    assert json.loads(Path(f"{path}.json").read_text()) == parameters
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npy", "run.npy.json"]
    # the diffusivity is a parameter: alpha 4 and 1/4 differ, and unknown names fail
    fast = {**parameters, "log2_alpha": 2.0}
    slow = {**parameters, "log2_alpha": -2.0}
    assert not np.allclose(next(solve(fast, SETUP.config)), next(solve(slow, SETUP.config)))
    with pytest.raises(ValueError, match="unknown \\['alpha'\\]"):
        check_parameters({**parameters, "alpha": 1.0})


@pytest.mark.timeout(120)
def test_both_pipelines_train_on_the_same_simulations(tmp_path, validation):
    simulated = off.simulate_offline(SETUP, tmp_path / "offline", N)
    files = [path for path, _ in simulated["files"]]
    assert simulated["simulations"] == N and len(files) == N
    design = hp.design(SETUP, N)
    for path, parameters in zip(sorted(files), design, strict=True):  # one per id, in order
        assert json.loads(Path(f"{path}.json").read_text()) == parameters
        truth = np.stack(list(solve(parameters, SETUP.config)))
        np.testing.assert_array_equal(np.load(path), truth)
    assert simulated["bytes_on_disk"] > N * SETUP.time_steps * SETUP.sample_bytes

    online = hp.run_online(SETUP, tmp_path / "online", validation, n_simulations=N, ratio=2)
    assert online["simulations"] == N
    assert online["samples_received"] == N * SETUP.time_steps  # every (simulation, step) once
    assert online["bytes_on_disk"] < simulated["bytes_on_disk"] / 10  # logs, no data
    assert online["steps"] > 0 and math.isfinite(online["val_mse"])

    offline = off.train_offline(SETUP, files, validation, epochs=2)
    batches = math.ceil(N * SETUP.time_steps / SETUP.batch_size)
    assert offline["steps"] == 2 * batches and offline["epochs"] == 2
    alone = hp.train_from_memory(
        SETUP, tmp_path / "memory", files, validation, steps=online["steps"], ratio=2
    )
    assert 0 < alone["steps"] <= online["steps"]
    for run in (online, offline, alone):  # the last validation is the final error
        assert run["curve"][-1][1] == run["val_mse"]


@pytest.mark.timeout(120)
def test_a_time_budget_stops_each_pipeline(tmp_path, validation):
    online = hp.run_online(
        SETUP, tmp_path / "online", validation, n_simulations=10_000, budget=3.0, eval_every=1.0
    )
    assert online["wall"] >= 3.0  # stopped by the budget, not by the end of the stream
    assert 0 < online["simulations"] < 10_000
    times = [t for t, _ in online["curve"]]
    assert times == sorted(times) and len(times) >= 3

    simulated = off.simulate_offline(SETUP, tmp_path / "offline", 10_000, duration=2.0)
    assert 0 < simulated["simulations"] < 10_000
    assert not list((tmp_path / "offline" / "data").glob("*.partial"))
    assert all(done <= simulated["wall"] + 0.5 for _, done in simulated["files"])

    # offline stopping at 1 s keeps what was complete by then, in order
    files, last, used = bench.prefix(simulated["files"], until=1.0)
    assert last <= 1.0 and files == [p for p, t in simulated["files"] if t <= 1.0]
    sizes = [
        Path(p).stat().st_size + Path(p + ".json").stat().st_size for p, _ in simulated["files"]
    ]
    files, _, used = bench.prefix(simulated["files"], bytes_max=sizes[0] + sizes[1] + 1)
    assert len(files) == 2 and used == sizes[0] + sizes[1]

    trained = off.train_offline(
        SETUP, files, validation, duration=1.0, start_time=2.0, eval_every=1.0
    )
    assert trained["wall"] >= 3.0 and trained["curve"][0][0] >= 2.0


@pytest.mark.timeout(300)
def test_the_command_prints_its_rows(tmp_path):
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "online_vs_offline.py"), "--quick", "--splits", "0.5",
         "--budget", "3", "--simulations", "4",
         # half, not a tenth, of what online streams in 3 s (8 simulations on a loaded
         # machine): a tenth held no simulation and offline's storage run had no data
         "--storage_fraction", "0.5",
         "--no_plot", "--json", "--output_dir", str(tmp_path)],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])["rows"]
    assert len(rows) == 6
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=1e-2)
    results = json.loads((tmp_path / "results.json").read_text())
    data, budget = results["data"], results["budget"]
    n = data["simulate"]["simulations"]
    assert data["online"]["samples_received"] == n * hp.Setup().time_steps
    stored = budget["storage"]
    assert stored["bytes_on_disk"] <= stored["storage_budget"]
    assert stored["storage_budget"] == int(0.5 * budget["online"]["bytes_streamed"])
    assert not list(tmp_path.glob("work-*"))  # the data is deleted


@pytest.mark.timeout(30)
@pytest.mark.parametrize("empty", ["share", "storage"])
def test_an_offline_case_without_a_simulation_is_named_not_crashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty: str
) -> None:
    """A share of the budget or a disk too small for one simulation: an error naming
    the option to raise, not a crash in the DataLoader (as before) or a figure for an
    offline run without data."""
    npy = tmp_path / "sim.npy"
    npy.write_bytes(b"x" * 1000)
    Path(f"{npy}.json").write_text("{}")

    def child(fn: str, setup: dict, workdir: Path, **kwargs: object) -> dict:
        if fn == "run_online":
            return {"simulations": 5, "wall": 4.0, "bytes_streamed": 3000}
        if fn == "simulate_offline":  # one simulation, complete after 1 s
            return {"files": [[str(npy), 1.0]]}
        return {"val_mse": 1.0}

    monkeypatch.setattr(bench, "child", child)
    splits, fraction = ([0.1], 1.0) if empty == "share" else ([0.5], 0.1)
    option = "--splits" if empty == "share" else "--storage_fraction"
    with pytest.raises(RuntimeError, match=option):
        bench.equal_budget({}, tmp_path, 4.0, splits, fraction, 1.0, 0.5)
