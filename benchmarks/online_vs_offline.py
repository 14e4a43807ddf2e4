"""Online versus offline training of the heat-equation surrogate, side by side.

The classic pipeline simulates the ensemble, writes every time step to disk (.npy per
simulation) and then trains for epochs with a `DataLoader` over the files; the online
one streams the same simulations into `OnlineTrainer` while they run. Both use the heat
example's solver (`examples/heat_pde/solver.py`; parameters: the five temperatures and
the diffusivity, alpha from 1/4 to 4) and model (an MLP (6 parameters, t) -> 32 x 32
field), Adam with the same cosine learning-rate decay, batch 32, the same seed and the
same 16 held-out simulations (see `heat_pipelines.py`). Resources are split the way a
GPU node splits them: `--sim_jobs` simulations at once (default 1: one core's worth)
and training on `--torch_threads` threads (default 1), in both pipelines; offline's
DataLoader has `--loader_workers` worker processes (default 0, the fastest here).

Three comparisons, each measured in this run:

1. Equal data (`--simulations`, default 128): wall time of each pipeline (offline:
   simulate + write, then `--ratio` epochs; online: the same simulations streamed, the
   same number of samples drawn), t_sim (the simulations alone) and t_train (online's
   training alone, from memory), disk bytes, peak RSS, validation error. Overlap
   efficiency = max(t_sim, t_train) / t_online (target >= 0.87).
2. Equal wall-clock budget (`--budget` s): online streams new simulations for the
   whole budget; offline simulates for a share f of it, then trains for the rest over
   epochs. Offline is run at every share in `--splits` and its best is the baseline.
   Target: offline error / online error >= 1.43.
3. Equal storage: offline may keep at most `--storage_fraction` (default 1/10) of the
   bytes online streamed in case 2; it simulates until its disk is full and trains for
   the rest of the same budget. Target: offline error / online error >= 1.43.

And the trainer's share of the machine: online's training rate in case 2 while its
simulations run beside it (steps per second after its first step), against the same
training alone (case 1's `train_from_memory`). Target: >= 0.9. The simulations are
started the way the library starts them by default (`--placement default`: the local
backend's `Placement`, niceness +10 in the trainer's session, one BLAS/OpenMP thread);
``--placement none`` starts them as the launcher did before placements existed (a
session of their own, OMP_NUM_THREADS=1 set here), and ``--placement_ab`` runs case 2's
online pipeline both ways, alternately, in the same run, with rows for each (each arm's
study sized from its own pace: case 1's, divided for the un-niced arm by the ratio of
CPU weights its niceness gains, `arm_pace`).

``--quick`` checks the pipelines, no figure: 6 simulations, offline's one share 0.5, a
disk of half what online streamed, and a budget of 6 s or 5 simulations' time (at case
1's online pace: `quick_budget`), whichever is longer, so that offline's share and disk
hold a simulation on a loaded machine too; an option given on the command line wins.
When offline's share or disk still holds no simulation (its simulations niced beside
online's trainer, online completed 2 in that budget at load ~11), cases 2 and 3 run
again with twice the budget, up to `QUICK_TRIES` runs in all, each retry said in a
line; past that, or with ``--budget`` given, the script stops with one line naming the
option to raise (exit status 1, no row).

Its tables, rows and plot are `online_vs_offline_report.py`'s; how large and how long
each case runs, `online_vs_offline_sizing.py`'s; the cases' runs, `online_vs_offline_cases.py`'s.

Every pipeline runs in its own process (clean peak RSS, threads and allocator), forked
from a server that imported torch once (`isolated.py`: 9 fresh interpreters cost ~35 s
of imports on 2 cores). Errors
are mean squared errors in kelvin squared over every point of every held-out step.

    python benchmarks/online_vs_offline.py           # about 10 minutes on 2 cores
    python benchmarks/online_vs_offline.py --quick   # about a minute: checks the pipelines
    python benchmarks/online_vs_offline.py --json    # last line {"rows": [...]}
    python benchmarks/online_vs_offline.py --placement_ab  # + online with placement=None
    python benchmarks/online_vs_offline.py --example navier_stokes  # the FNO: its own file,
                                                 # online_vs_offline_ns.py (issue 42 item 7)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heat_pipelines as hp  # noqa: E402
import regime  # noqa: E402
from online_vs_offline_cases import equal_budget, equal_data  # noqa: E402
from online_vs_offline_cli import parser  # noqa: E402

# the tables, rows and plot; the sizes of the cases (re-exported: the tests use them)
from online_vs_offline_report import (  # noqa: E402, F401
    TARGET_ERROR_RATIO,
    TARGET_OVERLAP,
    TARGET_SHARE,
    Run,
    plot,
    print_tables,
    rows,
)
from online_vs_offline_sizing import (  # noqa: E402, F401
    FULL,
    NICE_WEIGHT_STEP,
    QUICK,
    QUICK_BUDGET,
    QUICK_BUDGET_SIMULATIONS,
    QUICK_TRIES,
    TooShort,
    arm_pace,
    doubling,
    fill_defaults,
    quick_budget,
    simulation_nice,
    study_cap,
)
from report import print_json, print_rows  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402

#: the horizon every sweep point simulates (time_steps x dt), the default's
HORIZON = 0.1


def sweep_points(text: str) -> list[tuple[int, int]]:
    """``--sweep``'s points: "S" (100 time steps, S sub-steps) or "TxS" (T time steps
    of HORIZON / T each, S sub-steps each), comma-separated."""
    points = []
    for item in text.split(","):
        steps, _, sub = item.strip().rpartition("x")
        points.append((int(steps or 100), int(sub)))
    return points


def sweep(
    setup: dict[str, Any], work: Path, points: list[tuple[int, int]], opts: argparse.Namespace
) -> list[regime.Point]:
    """The regime map: case 2 and 3 (equal wall time, equal storage) at each solver cost
    in `points` ((time steps, sub-steps) of a simulation over the same horizon), training
    and simulations pinned to one core each; online starts training after two
    simulations' samples."""
    out = []
    splits = [float(s) for s in opts.splits.split(",")]
    for steps, s in points:
        config = {**setup, "substeps": s, "time_steps": steps, "dt": HORIZON / steps,
                  "pin": True, "watermark": 2 * steps}  # fmt: skip
        # a simulation's pace, to size the study: its solve here plus a start-up
        parameters = hp.design(hp.Setup(**config), 1)[0]
        t0 = time.perf_counter()
        for _ in hp.solve(parameters, hp.Setup(**config).config):
            pass
        pace = time.perf_counter() - t0 + 0.1
        print(f"{steps} time steps x {s} sub-steps: ~{pace:.2g} s a simulation", flush=True)
        try:
            budget = equal_budget(
                config, work / f"point-{steps}x{s}", opts.budget, splits, opts.storage_fraction,
                opts.budget / 12, pace,
            )  # fmt: skip
        except TooShort as exc:  # (the point named: `main_sweep` says it in one line)
            raise TooShort(f"at {steps} time steps x {s} sub-steps: {exc}") from exc
        out.append(regime.point(s, budget, steps))
    return out


def main() -> None:
    example = argparse.ArgumentParser(add_help=False)
    example.add_argument("--example", choices=("heat_pde", "navier_stokes"), default="heat_pde")
    known, rest = example.parse_known_args()
    if known.example == "navier_stokes":  # its own options: online_vs_offline_ns.py --help
        import online_vs_offline_ns

        return online_vs_offline_ns.main(rest)
    p = parser((__doc__ or "").split("\n\n")[0])
    opts = p.parse_args()
    if opts.sweep:
        return main_sweep(opts)
    fill_defaults(opts)
    splits = [float(s) for s in opts.splits.split(",")]
    setup = {"sim_jobs": opts.sim_jobs, "torch_threads": opts.torch_threads,
             "loader_workers": opts.loader_workers, "seed": opts.seed,
             "placement": opts.placement, "sim_nice": opts.sim_nice}  # fmt: skip
    if opts.quick:
        setup.update(buffer_size=400, watermark=100, n_validation=2)
    out = Path(opts.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="work-", dir=out))
    start = time.perf_counter()
    try:
        data = equal_data(setup, work / "data", opts.simulations, opts.ratio)
        pace = data["streamed"]["wall"] / opts.simulations
        tries = 1 if opts.budget is not None else QUICK_TRIES
        if opts.budget is None:  # --quick's: at online's pace in case 1, its trainer beside
            opts.budget = quick_budget(data["online"]["wall"] / opts.simulations)

        def cases(seconds: float, attempt: int) -> dict[str, Any]:
            return equal_budget(
                setup, work / f"budget-{attempt}", seconds, splits, opts.storage_fraction,
                seconds / 12, pace, ab=opts.placement_ab,
            )  # fmt: skip

        budget, opts.budget = doubling(cases, opts.budget, tries)
    except TooShort as exc:  # (said in one line: no figure, no traceback)
        sys.exit(f"online_vs_offline.py: cases 2 and 3 not measured: {exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_tables(data, budget, opts)
    table = rows(data, budget, opts)
    print_rows(table, "online vs offline (ours = online)", width=70)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    if not opts.no_plot:
        png = out / "online_vs_offline.png"
        plot(budget, png, opts)
        print(f"plot: {png}")
    (out / "results.json").write_text(to_json({"data": data, "budget": budget}, default=str))
    if opts.json:
        print_json(table)


def main_sweep(opts: argparse.Namespace) -> None:
    """`--sweep`: the regime map (table, rows, plot). A point whose offline share or disk
    holds no simulation (`TooShort`) stops it in one line naming the point and the
    option to raise (before: a traceback); not doubled (one budget for the whole map)."""
    opts.budget = opts.budget or (6.0 if opts.quick else 60.0)
    fill_defaults(opts)
    setup: dict[str, Any] = {"sim_jobs": 1, "torch_threads": 1, "seed": opts.seed}
    if opts.quick:
        setup.update(buffer_size=400, n_validation=2)
    out = Path(opts.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="work-", dir=out))
    start = time.perf_counter()
    try:
        points = sweep(setup, work, sweep_points(opts.sweep), opts)
    except TooShort as exc:  # (said in one line, as `main` says it: no map, no traceback)
        sys.exit(f"online_vs_offline.py: the regime map not measured: {exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    regime.print_table(points, opts.budget)
    table = regime.rows(points, opts.storage_fraction, TARGET_ERROR_RATIO)
    print_rows(table, "the regime map (ours = online)", width=90)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    if not opts.no_plot:
        png = out / "regime.png"
        regime.plot(points, png, opts.budget)
        print(f"plot: {png}")
    (out / "regime.json").write_text(to_json(points, default=str))
    if opts.json:
        print_json(table)


if __name__ == "__main__":
    main()
