"""`online_vs_offline.py --quick` on a loaded machine: online's simulations, niced beside
its trainer, complete few in `--quick`'s budget (2 at load ~11), and case 3's disk (half
of what online streamed) then holds no simulation (one file is a simulation's samples,
its .npy header and its JSON). The budget is doubled until it does (at most
`QUICK_TRIES` runs), each retry said; past that the script stops with one line naming
the option to raise, no traceback, no row. Failed before: a RuntimeError's traceback.

The load is a stand-in: the pipelines' processes (`child`) are replaced by one that
completes a simulation every `SECONDS_PER_SIMULATION` s of online's budget."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import heat_pipelines as hp  # noqa: E402
import online_vs_offline as bench  # noqa: E402
import online_vs_offline_cases as cases  # noqa: E402

SAMPLES = hp.Setup().time_steps  # a simulation's samples
SAMPLE_BYTES = hp.Setup().sample_bytes


def loaded(tmp_path: Path, seconds_per_simulation: float, calls: list[tuple[str, Any]]):
    """A `child` on a loaded machine: online completes one simulation every
    `seconds_per_simulation` s of its budget; offline's simulate writes a file (a
    simulation's float32 samples, a 128-byte header, its JSON) every 0.5 s."""
    files = tmp_path / "files"
    files.mkdir(exist_ok=True)

    def child(fn: str, setup: dict, workdir: Path, **kwargs: Any) -> dict:
        calls.append((fn, kwargs.get("budget", kwargs.get("duration"))))
        if fn == "run_online":
            n = int(kwargs["budget"] // seconds_per_simulation)
            return {"simulations": n, "wall": kwargs["budget"],
                    "bytes_streamed": n * SAMPLES * SAMPLE_BYTES}  # fmt: skip
        if fn == "simulate_offline":
            done = []
            for i in range(int(kwargs["duration"] / 0.5)):
                path = files / f"sim-{i}.npy"
                path.write_bytes(b"x" * (128 + SAMPLES * SAMPLE_BYTES))
                Path(f"{path}.json").write_text(json.dumps({"t_left": 300.0}))
                done.append([str(path), 0.5 * (i + 1)])
            return {"files": done}
        return {"val_mse": 1.0}

    return child


def run_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: Any, *args: str) -> None:
    """`main()` with --quick and `args`; case 1 at 1 s a simulation (quick_budget: 6 s),
    the tables and rows left out (their figures are the stand-in's)."""
    monkeypatch.setattr(cases, "child", child)
    case1 = {"online": {"wall": 6.0}, "streamed": {"wall": 6.0}}
    monkeypatch.setattr(bench, "equal_data", lambda *a, **k: case1)
    monkeypatch.setattr(bench, "print_tables", lambda *a: None)
    monkeypatch.setattr(bench, "rows", lambda *a: [{"case": "stand-in"}])
    monkeypatch.setattr(bench, "print_rows", lambda *a, **k: None)
    argv = ["online_vs_offline.py", "--quick", "--no_plot", "--json",
            "--output_dir", str(tmp_path / "out"), *args]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()


@pytest.mark.timeout(60)
def test_quick_doubles_its_budget_until_case_3s_disk_holds_a_simulation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 5 s a simulation: 6 s -> 1 simulation streamed; 12 s -> 2 (half of it is one
    # simulation's samples, less than its file); 24 s -> 4: a disk of 2 files
    calls: list[tuple[str, Any]] = []
    run_main(tmp_path, monkeypatch, loaded(tmp_path, 5.0, calls))
    out = capsys.readouterr().out
    assert [b for fn, b in calls if fn == "run_online"] == [6.0, 12.0, 24.0]
    assert out.count("holds no simulation") == 2, out
    assert "again with a budget of 12 s (try 2 of 3)" in out, out
    assert "again with a budget of 24 s (try 3 of 3)" in out, out
    assert "online completed 1 simulation in the 6 s" in out, out
    assert "online completed 2 simulations in the 12 s" in out, out
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    stored = results["budget"]["storage"]
    assert stored["storage_budget"] == 2 * SAMPLES * SAMPLE_BYTES  # half of 4 streamed
    assert stored["bytes_on_disk"] <= stored["storage_budget"]
    assert json.loads(out.strip().splitlines()[-1]) == {"rows": [{"case": "stand-in"}]}
    assert not list((tmp_path / "out").glob("work-*"))  # the data is deleted


@pytest.mark.timeout(60)
@pytest.mark.parametrize("given", [(), ("--budget", "6")], ids=["quick", "budget given"])
def test_an_unmeasurable_case_3_stops_in_one_line_without_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    given: tuple[str, ...],
) -> None:  # fmt: skip
    # 100 s a simulation: none streamed at any budget tried; a --budget given is not
    # doubled (an option given wins)
    calls: list[tuple[str, Any]] = []
    with pytest.raises(SystemExit) as stop:
        run_main(tmp_path, monkeypatch, loaded(tmp_path, 100.0, calls), *given)
    said = str(stop.value.code)
    assert said.startswith("online_vs_offline.py: cases 2 and 3 not measured: offline with"), said
    assert "raise --storage_fraction or --budget" in said and "\n" not in said, said
    tried = [b for fn, b in calls if fn == "run_online"]
    assert tried == ([6.0] if given else [6.0, 12.0, 24.0]), tried
    out = capsys.readouterr().out
    assert '"rows"' not in out, out
    assert not (tmp_path / "out" / "results.json").exists()
    assert not list((tmp_path / "out").glob("work-*"))


@pytest.mark.timeout(60)
def test_a_sweep_point_whose_disk_holds_no_simulation_stops_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--sweep``: a point whose case 3 disk holds no simulation stops the map in one
    line naming the point and the option to raise, as the plain mode does. Failed
    before: `TooShort`'s traceback."""
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(cases, "child", loaded(tmp_path, 100.0, calls))
    monkeypatch.setattr(hp, "solve", lambda *a: iter(()))  # (the pace's solve: none)
    argv = ["online_vs_offline.py", "--quick", "--sweep", "50x2", "--no_plot",
            "--output_dir", str(tmp_path / "out")]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as stop:
        bench.main()
    said = str(stop.value.code)
    assert said.startswith(
        "online_vs_offline.py: the regime map not measured: at 50 time steps x 2 sub-steps: "
        "offline with a disk of"
    ), said
    assert "raise --storage_fraction or --budget" in said and "\n" not in said, said
    assert [b for fn, b in calls if fn == "run_online"] == [6.0], calls
    assert not (tmp_path / "out" / "regime.json").exists()
    assert not list((tmp_path / "out").glob("work-*"))
