"""The figures of benchmarks/online_vs_offline_ns.py: its rows (`rows`: val MSE, wall and
CPU seconds, offline / online, medians over the rounds), one round's lines (`print_round`)
and the published ratio they are read against (`ICML_2023_FNO`)."""

from __future__ import annotations

import argparse
import statistics

#: the ICML 2023 paper's FNO: offline error / online error (Meyer et al., "Training Deep
#: Surrogate Models with Large Scale Online Learning": +16% online, as issue 42 quotes it)
ICML_2023_FNO = 1.16


def median(runs: list[dict], *path: str) -> float:
    values = []
    for run in runs:
        for key in path:
            run = run[key]
        values.append(float(run))  # type: ignore[arg-type]
    return statistics.median(values)


def rows(online: list[dict], offline: list[dict], opts: argparse.Namespace) -> list[dict]:
    def row(case: str, ours: float, baseline: float, unit: str) -> dict:
        return {"case": case, "ours": round(ours, 5), "baseline": round(baseline, 5),
                "unit": unit, "ratio": round(baseline / ours, 3), "target": None}  # fmt: skip

    splits = list(offline[0]["splits"])
    best = min(splits, key=lambda f: median(offline, "splits", f, "val_mse"))
    n, ref = opts.simulations, f"(ICML 2023 FNO: {ICML_2023_FNO})"
    return [
        row(f"NS equal data ({n} simulations, online's steps): val MSE, offline / online {ref}",
            median(online, "val_mse"), median(offline, "equal_data", "val_mse"), "mse"),
        row("NS equal data: wall s of the process tree, offline (simulate, train) / online",
            median(online, "process_wall"), median(offline, "process_wall"), "s"),
        row("NS equal data: CPU s of the process tree, offline / online",
            median(online, "process_cpu"), median(offline, "process_cpu"), "CPU-s"),
        row(f"NS equal wall time: val MSE, offline (best: {float(best):.0%} simulating) / "
            f"online {ref}", median(online, "val_mse"),
            median(offline, "splits", best, "val_mse"), "mse"),
        row(f"NS equal storage ({opts.storage_fraction:g} of the data set): val MSE, offline / "
            f"online {ref}", median(online, "val_mse"), median(offline, "storage", "val_mse"),
            "mse"),
    ]  # fmt: skip


def print_round(k: int, on: dict, off: dict) -> None:
    eq = off["equal_data"]
    print(f"round {k}: online  val MSE {on['val_mse']:.4g}, {on['steps']} steps, train() "
          f"{on['wall_seconds']:.1f} s, process {on['process_wall']:.1f} s wall, "
          f"{on['process_cpu']:.1f} CPU-s", flush=True)  # fmt: skip
    print(f"round {k}: offline val MSE {eq['val_mse']:.4g}, {eq['steps']} steps, simulate "
          f"{off['simulate_wall']:.1f} s + train {eq['wall']:.1f} s, process "
          f"{off['process_wall']:.1f} s wall, {off['process_cpu']:.1f} CPU-s; equal wall: "
          + ", ".join(f"{float(f):.0%} simulating {r['val_mse']:.4g} "
                      f"({r['simulations']} sims, {r['steps']} steps)"
                      for f, r in off["splits"].items())
          + f"; disk <= {off['storage']['bytes_on_disk']:,} B: {off['storage']['val_mse']:.4g} "
          f"({off['storage']['simulations']} sims)", flush=True)  # fmt: skip
