"""`--seeds N` is a flag of every study example (`examples/study_common.py`'s
`StudyArgs`): "run the whole study this many times ... and report the spread". The
Navier-Stokes example ran the study once and ignored it; `run_seeds` gave every run
``--no_plot``, which the C heat example (no plot to turn off) refused, so heat_c
refused ``--seeds``: now `run_seeds` is told whether the example has a plot, and heat_c
runs its study once per seed (its test: tests/examples/test_c_examples.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from process_tree import run_group

EXAMPLES = Path(__file__).parents[2] / "examples"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TINY_FLOW = [
    "--num_simulations", "2", "--time_steps", "2", "--grid_size", "16", "--modes", "4",
    "--width", "4", "--layers", "1", "--num_validation", "1", "--watermark", "2",
    "--batch_size", "2", "--eval_steps", "none", "--job_limit", "2",
    "--disable_progress_bar",
]  # fmt: skip


@pytest.mark.slow
def test_the_navier_stokes_example_runs_the_study_once_per_seed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLES / "navier_stokes" / "train.py"), *TINY_FLOW,
           "--seed", "5", "--seeds", "2", "--json", "--output_dir", str(out)]  # fmt: skip
    proc = run_group(cmd, timeout=280, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])  # the last line: the report
    assert [run["seed"] for run in report["seeds"]] == [5, 6]
    for run in report["seeds"]:  # each seed's own study, in its own directory
        args = next((out / f"seed-{run['seed']}" / "checkpoints").glob(
            "checkpoint-*/training_args.json"))  # fmt: skip
        assert json.loads(args.read_text())["seed"] == run["seed"]
    assert "val_mse over 2 seeds (5..6)" in proc.stdout
    assert not (out / "checkpoints").exists()  # no run of its own beside the seeds'


#: a study example reduced to its command line: argparse's (exit status 2 on a flag it does
#: not know), with ``--no_plot`` only if HAS_PLOT; records the argv it got, prints a
#: line of progress and then its JSON summary (val_mse: the seed / 10)
FAKE_EXAMPLE = """
import argparse, json, pathlib, sys
parser = argparse.ArgumentParser()
for flag in ("--seed", "--output_dir", "--learning_rate"):
    parser.add_argument(flag)
parser.add_argument("--json", action="store_true")
if HAS_PLOT:
    parser.add_argument("--no_plot", action="store_true")
args = parser.parse_args()
out = pathlib.Path(args.output_dir)
out.mkdir(parents=True)
(out / "argv.json").write_text(json.dumps(sys.argv[1:]))
print("training...")
print(json.dumps({"val_mse": int(args.seed) / 10}))
"""


@pytest.mark.parametrize("plots", [True, False])
def test_run_seeds_turns_plots_off_only_where_the_example_has_them(
    plots: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run_seeds` gives each run ``--no_plot`` only if the example says it has a plot
    (`plots`): heat_c has none, and refused every seed's ``--no_plot`` (exit status 2)
    when `run_seeds` always passed it. The rest of the command line is passed on, less
    the flags each run gets its own of."""
    from study_common import run_seeds

    script = tmp_path / "train.py"
    script.write_text(f"HAS_PLOT = {plots}\n" + FAKE_EXAMPLE)
    argv = ["--learning_rate", "0.1", "--seeds", "2", "--seed", "9", "--json",
            "--output_dir", "ignored"] + (["--no_plot"] if plots else [])  # fmt: skip
    report = run_seeds(script, argv, 2, 3, tmp_path / "out", plots=plots)
    for seed in (3, 4):
        out = tmp_path / "out" / f"seed-{seed}"
        assert json.loads((out / "argv.json").read_text()) == [
            "--learning_rate", "0.1", "--seed", str(seed), "--output_dir", str(out), "--json",
        ] + (["--no_plot"] if plots else [])  # fmt: skip
    assert [run["seed"] for run in report["seeds"]] == [3, 4]
    assert report["min"] == pytest.approx(0.3) and report["max"] == pytest.approx(0.4)
    assert report["median"] == pytest.approx(0.35)
    assert "val_mse over 2 seeds (3..4)" in capsys.readouterr().out


# heat_c's --seeds, end to end (it needs the compiled solver):
# tests/examples/test_c_examples.py::test_train_py_runs_the_study_once_per_seed
