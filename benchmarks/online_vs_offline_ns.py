"""Online versus offline training on the Navier–Stokes example (issue 42, item 7), the way
Melissa's ICML 2023 paper compares them: the same FNO, the same simulations, offline's
data written to disk first and trained on for epochs, online's streamed.

Each round runs two arms, each in a process of its own, one after the other (online,
offline, online, offline, ...: interleaved), at a small configuration of the example
(`CONFIG`: 32^2, 10 fields a simulation, FNO width 12, 8 modes, 3 layers, batch 16,
constant-rate Adam 3e-3, the same seed):

* **online**: ``examples/navier_stokes/train.py`` itself (its `main`), streaming
  `--simulations` simulations (`--job_limit` at a time, the library's default placement)
  into its reservoir (big enough for all of them) and training while they run;
  its validation error is the example's own (the trainer's ``eval_loss``).
* **offline** (this file's ``--offline_child`` mode): the same simulations (the same
  `Launcher`, sampler and seed, so the same parameters and initial fields), each
  writing its run to a ``.npy`` with the solver's ``--save_npy`` (`--job_limit` at a
  time), then the same model, optimizer and batch size trained from the files, loaded
  into memory and reshuffled every epoch (a plain torch loop, nothing of the library's),
  then validated on the same held-out simulations (`train.validation_set`, seed + 1) with
  the same mean squared error.

Both train on one torch thread (``OMP_NUM_THREADS=1``; the simulations get the other core
of a 2-core machine: the split of a GPU node). Three comparisons per round, offline run
three ways from the one set of files (the simulations' completion times say which
files an offline run stopping at time T has):

1. **Equal data**: offline trains on all the simulations for exactly online's number of
   steps (the same number of samples drawn). Both arms' validation MSE, and each arm's
   wall and CPU time as a whole process tree (interpreter, imports and validation set
   included; offline: simulations, then training; its other trainings below excluded).
2. **Equal wall time** W, online's ``train()`` time (simulations and training
   overlapped): offline simulates for a share f of W and trains for the rest, at each
   share in `--splits`; its best is the baseline (a share by which no simulation was
   complete leaves offline its untrained model).
3. **Equal storage**: offline's disk holds `--storage_fraction` of the whole data set
   (its .npy files; online stores none of it): it simulates until its disk is full and
   trains for the rest of W.

Rows (ours = online; ratio = offline / online, higher is better for online): the
validation MSE of each comparison, and case 1's wall and CPU time. The ICML 2023 paper
reports the FNO 16% better online (a ratio of 1.16) at its scale (many more simulations
than offline could store); printed beside the ratios for reference, not a target. The
medians over `--rounds`; the mean-field and persistence baselines of the validation set
are printed too.

    python benchmarks/online_vs_offline_ns.py            # 3 rounds (48 min at load 20, 2 cores)
    python benchmarks/online_vs_offline_ns.py --quick    # tiny, checks the pipelines
    python benchmarks/online_vs_offline.py --example navier_stokes --json   # the same
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLE = ROOT / "examples" / "navier_stokes"
sys.path.insert(0, str(HERE))  # report.py
from online_vs_offline_ns_report import print_round, rows  # noqa: E402
from report import add_flags, print_json, print_rows  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402

#: the example's flags both arms share (FlowArgs and TrainingArguments names)
CONFIG: dict[str, Any] = {
    "grid_size": 32, "time_steps": 10, "interval": 0.5, "dt": 0.05, "num_validation": 4,
    "model": "fno", "width": 12, "modes": 8, "layers": 3, "learning_rate": 3e-3,
    "batch_size": 16,
}  # fmt: skip
QUICK: dict[str, Any] = {
    "grid_size": 16, "time_steps": 4, "dt": 0.1, "num_validation": 2, "width": 8,
    "modes": 4, "layers": 2, "batch_size": 8,
}  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's reaped descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], log: Path) -> tuple[dict[str, Any], float, float]:
    """Run `argv` (output to `log`); its last stdout line as JSON, its wall and the CPU
    seconds of its process tree (the solvers it reaped included)."""
    cpu, start = children_cpu(), time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=out, text=True, env=ENV)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    log.write_text(log.read_text() + proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[1]} exited {proc.returncode}: see {log}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall, cpu


def flags(config: dict[str, Any]) -> list[str]:
    return [f"--{k}={v}" for k, v in config.items()]


def run_online(config: dict[str, Any], n: int, opts: argparse.Namespace, work: Path) -> dict:
    """The example, streaming `n` simulations; its summary with the process's wall/CPU."""
    samples, batch = n * config["time_steps"], config["batch_size"]
    # training starts once a quarter of the data (at most two batches) has arrived
    watermark = max(batch, min(2 * batch, samples // 4))
    argv = [
        sys.executable, str(EXAMPLE / "train.py"), *flags(config), f"--num_simulations={n}",
        f"--job_limit={opts.job_limit}", f"--seed={opts.seed}", f"--output_dir={work}",
        f"--buffer_size={samples}", f"--watermark={watermark}",
        f"--sample_to_insert_ratio={opts.ratio}", "--eval_steps=none", "--logging_steps=1000",
        "--no_plot", "--no_save_at_end", "--disable_progress_bar", "--json",
    ]  # fmt: skip
    summary, wall, cpu = timed(argv, work.with_suffix(".log"))
    if summary["samples_received"] != samples:
        raise RuntimeError(f"online received {summary['samples_received']} of {samples}")
    return {**summary, "process_wall": wall, "process_cpu": cpu}


def run_offline(
    config: dict[str, Any], n: int, opts: argparse.Namespace, work: Path, online: dict
) -> dict:
    """This file's offline child on `n` simulations, told online's steps, wall and bytes."""
    spec = {
        "config": config, "n": n, "job_limit": opts.job_limit, "seed": opts.seed,
        "work": str(work), "steps": online["steps"], "budget": online["wall_seconds"],
        "splits": [float(s) for s in opts.splits.split(",")],
        "storage_fraction": opts.storage_fraction,
    }  # fmt: skip
    argv = [sys.executable, __file__, "--offline_child", json.dumps(spec)]
    result, wall, cpu = timed(argv, work.with_suffix(".log"))
    extra = result["time_bounded"]  # the equal-wall and equal-storage trainings
    result["process_wall"] = wall - extra["wall"]
    result["process_cpu"] = cpu - extra["cpu"]
    return result


# -- the offline child --------------------------------------------------------------------


def offline_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Simulate to disk, then train: equal data (online's steps on every file), then
    each split of the budget and the storage-bounded run (trained for what is left of
    the budget after their last file was complete). Returns every run's figures."""
    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT / "examples"))
    from navier_stokes import train as ns
    from study_common import SAMPLER_OPTIONS

    from melissa_trainer.launcher import Launcher, make_sampler

    torch.set_num_threads(1)
    config, work, seed = spec["config"], Path(spec["work"]), spec["seed"]
    opts = ns.FlowArgs(**{k: v for k, v in config.items() if k != "batch_size"})
    validation = ns.validation_set(opts, seed=seed + 1)  # the example's held-out set
    mapping = ns.make_process_sample(opts.time_steps)
    val_x, val_y = (torch.stack(t) for t in zip(*map(mapping, validation), strict=True))

    # 1. simulate: the example's launcher, sampler and seed; each run to a .npy
    data = work / "data"
    data.mkdir(parents=True)
    pattern = str(data / "sim-{simulation_id:06d}.npy")
    launcher = Launcher(
        simulation=[sys.executable, str(ns.SOLVER), *opts.config.argv(), "--save_npy", pattern],
        sampler=make_sampler(
            "lhs", ns.PARAMETER_BOUNDS, seed=seed, **SAMPLER_OPTIONS.get("lhs", {})
        ),
        n_simulations=spec["n"],
        job_limit=spec["job_limit"],
        env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    t0_wall, t0, cpu0 = time.time(), time.perf_counter(), children_cpu()
    launcher.start(work / "rendezvous", study_dir=work)
    try:
        while not launcher.done:
            launcher.check()
            time.sleep(0.005)
        simulate_wall = time.perf_counter() - t0
    finally:
        launcher.stop()
    files = sorted((p.stat().st_mtime - t0_wall, p) for p in data.glob("*.npy"))
    if len(files) != spec["n"]:
        raise RuntimeError(f"offline: {len(files)} of {spec['n']} simulations completed")

    def tensors(paths: list[Path]) -> tuple[torch.Tensor, torch.Tensor]:
        samples = []
        for path in paths:
            fields = np.load(path)
            record = json.loads(Path(f"{path}.json").read_text())
            vector = np.array([record["parameters"][k] for k in ns.PARAMETER_NAMES])
            for step in range(opts.time_steps):
                samples.append({"initial": fields[0], "vorticity": fields[step + 1],
                                "time_step": np.array(step), "parameters": vector})  # fmt: skip
        x, y = zip(*map(mapping, samples), strict=True)
        return torch.stack(x), torch.stack(y)

    def fit(paths: list[Path], steps: int | None, duration: float | None) -> dict[str, Any]:
        """Train a fresh model (the example's seed and init) on `paths` for `steps` steps or
        `duration` s, reshuffling every epoch; its validation MSE."""
        start, cpu = time.perf_counter(), time.process_time()
        torch.manual_seed(seed)
        model = ns.make_model(opts.model, ns.CHANNELS, opts.width, opts.modes, opts.layers)
        optimizer = torch.optim.Adam(model.parameters(), lr=opts.learning_rate)
        generator, batch, done = torch.Generator().manual_seed(seed), config["batch_size"], 0
        # no file yet (no simulation was complete by then): the untrained model is what
        # offline has; else the files, read into memory (part of offline's training)
        x, y = tensors(paths) if paths else (None, None)
        while x is not None and (steps is None or done < steps):
            order = torch.randperm(len(x), generator=generator)
            for i in range(0, len(x), batch):
                if done == steps or (
                    duration is not None and time.perf_counter() - start >= duration
                ):
                    break
                rows = order[i : i + batch]
                loss = torch.nn.functional.mse_loss(model(x[rows]), y[rows])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                done += 1
            else:
                continue
            break
        with torch.no_grad():
            mse = torch.nn.functional.mse_loss(model(val_x), val_y).item()
        return {"val_mse": mse, "steps": done, "simulations": len(paths),
                "wall": time.perf_counter() - start, "cpu": time.process_time() - cpu}  # fmt: skip

    every = [p for _, p in files]
    out: dict[str, Any] = {
        "simulate_wall": simulate_wall, "simulate_cpu": children_cpu() - cpu0,
        "equal_data": fit(every, spec["steps"], None),
        "bytes_on_disk": sum(p.stat().st_size + Path(f"{p}.json").stat().st_size for p in every),
    }  # fmt: skip
    budget, bounded = spec["budget"], []
    out["splits"] = {}
    for f in spec["splits"]:
        chosen = [p for t, p in files if t <= f * budget]
        out["splits"][str(f)] = run = fit(chosen, None, (1 - f) * budget)
        bounded.append(run)
    storage = spec["storage_fraction"] * out["bytes_on_disk"]
    kept, used, last = [], 0, 0.0
    for t, p in files:
        size = p.stat().st_size + Path(f"{p}.json").stat().st_size
        if used + size > storage:
            break
        kept, used, last = [*kept, p], used + size, t
    if not kept:
        raise RuntimeError(
            f"a disk of {spec['storage_fraction']:g} of the data set ({storage:,.0f} B) holds "
            "no simulation: raise --storage_fraction or --simulations"
        )
    out["storage"] = {**fit(kept, None, max(budget - last, 0.0)), "bytes_on_disk": used}
    bounded.append(out["storage"])
    out["time_bounded"] = {"wall": sum(r["wall"] for r in bounded),
                           "cpu": sum(r["cpu"] for r in bounded)}  # fmt: skip
    shutil.rmtree(data)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--simulations", type=int, help="per arm (default 32; --quick 6)")
    p.add_argument("--rounds", type=int, help="online, offline pairs (default 3; --quick 1)")
    p.add_argument("--job_limit", type=int, default=1, help="simulations at once, both arms")
    p.add_argument("--ratio", type=float, default=0.0, help=(
        "online's sample_to_insert_ratio (default 0: no rate limit, training runs as fast "
        "as it can on what the reservoir holds, as offline's does on its files)"))  # fmt: skip
    p.add_argument("--splits", default="0.25,0.5,0.75", help="offline's shares simulating")
    p.add_argument("--storage_fraction", type=float, help=(
        "equal storage: offline's disk, a share of the whole data set's .npy files "
        "(default 0.1; --quick 0.34)"))  # fmt: skip
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--output_dir", default="outputs/online_vs_offline_ns")
    add_flags(p, quick="tiny sizes: checks, no figures")
    p.add_argument("--offline_child", metavar="SPEC", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    if opts.offline_child:
        print(to_json(offline_child(json.loads(opts.offline_child))))
        return
    # the defaults of the mode (`or` would take an explicit 0 for unset)
    for name, quick, full in (
        ("simulations", 6, 32),
        ("rounds", 1, 3),
        ("storage_fraction", 0.34, 0.1),
    ):
        if getattr(opts, name) is None:
            setattr(opts, name, quick if opts.quick else full)
    for name in ("simulations", "rounds", "job_limit"):
        if getattr(opts, name) < 1:
            p.error(f"--{name} {getattr(opts, name)} must be >= 1")
    if not 0 < opts.storage_fraction <= 1:
        p.error(f"--storage_fraction {opts.storage_fraction} must be in (0, 1]")
    if opts.ratio < 0:
        p.error(f"--ratio {opts.ratio} must be >= 0 (0: no rate limit)")
    try:
        shares = [float(s) for s in opts.splits.split(",")]
    except ValueError:
        shares = []
    if not shares or not all(0 < f < 1 for f in shares):
        p.error(f"--splits {opts.splits}: each share must be in (0, 1), comma-separated")
    config = {**CONFIG, **(QUICK if opts.quick else {})}
    out = Path(opts.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="work-", dir=out))
    online: list[dict] = []
    offline: list[dict] = []
    start = time.perf_counter()
    try:
        for k in range(opts.rounds):  # interleaved: online, offline, online, offline, ...
            online.append(run_online(config, opts.simulations, opts, work / f"online-{k}"))
            offline.append(
                run_offline(config, opts.simulations, opts, work / f"offline-{k}", online[-1])
            )
            print_round(k, online[-1], offline[-1])
    except BaseException:
        print(f"the runs' folders and logs are kept in {work}", file=sys.stderr)
        raise
    shutil.rmtree(work, ignore_errors=True)
    first = online[0]
    print(f"validation baselines: mean field {first['mean_field_mse']:.4g}, persistence "
          f"{first['persistence_mse']:.4g}")  # fmt: skip
    table = rows(online, offline, opts)
    print_rows(table, f"Navier-Stokes, online vs offline (ours = online), medians of "
               f"{opts.rounds} interleaved rounds", width=96)  # fmt: skip
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    (out / "results.json").write_text(to_json({"online": online, "offline": offline}))
    if opts.json:
        print_json(table)


if __name__ == "__main__":
    main()
