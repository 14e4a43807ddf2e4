"""The surrogate acquisition's cost on the trainer (issue 46): the trainer's step rate
with `SurrogateSampler` steering the study (on) against the same study without it
(off), measured interleaved in one run (on, off, on, off ...), per pair.

**On**: a study of `active_sampling.py`'s heat problem (its ``--space``, 12 parameters
by default) drawn by the surrogate acquisition: the trainer computes per-sample losses
and reduces them per simulation every 20 steps, rank 0 feeds them to the sampler, whose
draws (a Gaussian-process fit and 1024 candidates scored per acquisition) run on the
launcher's thread. **Off**: the very same simulations, in the same order (the on run's
draws replayed by a `ListSampler`): no loss tracking, no acquisition. The trainer is
paced to the simulations only by the reservoir's default sample-to-insert ratio (16):
about the first 480 of 1500 steps run while the simulations stream, the rest replay
the reservoir. The pairs alternate which arm runs first (order effects on a machine
whose load drifts cancel): an even pair runs on (its draws free), then off replaying
them; an odd pair runs off first, replaying the previous pair's draws, then on, whose
sampler draws and observes as ever (its CPU counted) while its study launches those
same replayed parameters (`force_draws`). Both arms of a pair run the same simulations
either way. A pair's two studies run one after the other in one fresh process (what
differs between processes, their memory's layout among others, then weighs on both
arms; `--design`: `cost_spread.DESIGNS`, "ref" one process per study as before).

Rates over the span from the first step to the last: steps per CPU-second of **the
training thread and the sampler** (the thread's CPU, plus the CPU of every draw and
observation of the sampler made in the same span, on whichever thread it ran; its draws
before the first step and its observations at the launcher's stop are printed apart,
not counted); steps per CPU-second of the trainer's **process** (also its receivers'
and launcher's polling threads, whose CPU grows with the wall time, so with the
machine's load); steps per **wall** second (follows the load).

**The target's row** (issue 46, ninth round; the rule fixed on A/A pairs, both arms the
same code, before any on / off run of this design: docs/measured.md): every 10 steps the
training thread also runs a **reference** workload (its CPU taken out of the span's), so
each study measures the machine's speed at the moments its steps ran. Since the twelfth
round (`--design refc-inproc`, the default) the reference is a small matrix product,
repeated, that stays in the first caches (`step_reference.ComputeReference`), run after
steps 5, 15, 25, ..., never right after a reduction of the per-simulation losses (after
the multiples of 20); the ninth round's, a step of a copy of the model after steps 10,
20, ... (`ref-inproc`), was slowed 8-12% by the on arm's work. A study's rate is its
steps per CPU-second of the training thread and the sampler divided by its reference's
runs per CPU-second; the row is **the median over the pairs of on / off of that
normalised rate**. Target: >= 0.97. Printed apart, no target: the eighth round's rows
(the ratio of the arms' medians of the raw rate, the process's and the wall's rates;
the median of the pairs' ratios of the raw rate) and the reference's own rate on / off
(the control variate is sound only if the arms' work leaves it alone: near 1). Beyond
`cost_spread.REFERENCE_TOLERANCE` (3%) the target's row is **void** (no ratio, no
target; the case says why) and the target falls back to the eighth round's row, the
ratio of the arms' medians of the uncorrected rate (kept on the twelfth round's A/A
pairs: the median of the pairs' ratios was no less noisy). `--aa off|on` runs A/A pairs
instead and prints their spread per design and rate (`cost_spread`).

    python benchmarks/surrogate_cost.py             # 5 pairs, 48 simulations, 3000 steps
    python benchmarks/surrogate_cost.py --json      # last line {"rows": [...]}
    python benchmarks/surrogate_cost.py --quick     # tiny: checks the pipeline, no figure
    python benchmarks/surrogate_cost.py --sampler density   # DensitySampler instead
    python benchmarks/surrogate_cost.py --aa off --designs old,ref --pairs 5  # A/A spread
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
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import active_sampling as bench  # noqa: E402
import heat_pipelines as hp  # noqa: E402
import step_reference  # noqa: E402
from report import print_rows  # noqa: E402
from study_clocks import SamplerClock, StepClock, force_draws  # noqa: E402, F401

from melissa_trainer import (  # noqa: E402
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.common.json_output import to_json  # noqa: E402
from melissa_trainer.launcher import Launcher, LauncherTuning, ListSampler  # noqa: E402

TARGET = 0.97
#: a study spec's draws: replay those of the study run just before it
PREVIOUS = "previous"


def study(setup: bench.Setup, seed: int, draws: list[dict[str, float]] | None, work: Path,
          kind: str = "surrogate", forced: list[dict[str, float]] | None = None,
          pin: bool = False, ratio: float | None = None,
          reference: dict[str, Any] | None = None, parts: bool = False):  # fmt: skip
    """One study: the adaptive sampler `kind`'s (`draws` None; its draws replaced by
    `forced` if given) or the replay of `draws`; returns its steps per second and the
    parameters it ran, in launch order (with `parts`, also the training thread's CPU
    split by `parts_clock.PartsClock`, under ``"parts"``)."""
    torch.set_num_threads(1)  # the other core runs the simulations
    if pin:  # every thread and process started from here on: the last core
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[-1]})
    sampler = bench.make_arm(setup, kind, seed) if draws is None else ListSampler(draws)
    if forced is not None:
        force_draws(sampler, forced)
    sampler_clock = SamplerClock(sampler)
    n = setup.grid_size
    launcher = Launcher([sys.executable, str(hp.SOLVER), *setup.config.argv()], sampler,
                        setup.simulations, env={"OMP_NUM_THREADS": "1"},
                        tuning=LauncherTuning(poll_interval=hp.POLL))  # fmt: skip
    stream = StreamSource(ReceiverConfig(rendezvous_dir=work / "rendezvous",
                                         fields={"temperature": ((n, n), "float32")}))  # fmt: skip
    args = TrainingArguments(
        output_dir=str(work / "trainer"), seed=seed, batch_size=setup.batch_size,
        logging_steps=10**9, report_to="none", disable_progress_bar=True, save_at_end=False,
        buffer="reservoir", watermark=setup.watermark,
        buffer_size=setup.simulations * setup.time_steps, max_steps=setup.steps,
        pseudo_epochs=10**6, sample_to_insert_ratio=ratio,
    )  # fmt: skip
    model = bench.make_model(setup, seed)
    clock = StepClock(sampler_clock)
    clock.trace, clock.launcher = [], launcher
    if pin:
        clock.pin = cores[0]
    planned = step_reference.plan(reference)
    if planned:
        kind_of, clock.every, clock.offset = planned
        clock.reference = step_reference.make_reference(kind_of, model, setup.batch_size)
    data: dict[str, Any] = {"calls": 0, "cpu": 0.0, "threads": set()}

    def process_sample(sample: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        start = time.thread_time()
        x = bench.features(setup, sample["parameters"], int(sample["time_step"]))
        out = torch.from_numpy(x), torch.from_numpy(bench.target(sample["temperature"]))
        data["calls"] += 1
        data["cpu"] += time.thread_time() - start
        data["threads"].add(threading.get_ident())
        return out

    hooks: list[Hook] = [clock]
    parts_clock: Any = None
    if parts:
        from parts_clock import PartsClock  # (here: `study_parts.py`'s alone)

        from melissa_trainer.core.loss_steps import DEFAULT_SIMULATION_LOSS_STEPS

        parts_clock = PartsClock(DEFAULT_SIMULATION_LOSS_STEPS)
        hooks.append(parts_clock)
    trainer = OnlineTrainer(model, args, torch.optim.Adam(model.parameters(), lr=1e-3),
                            train_source=Study(launcher, stream),
                            process_sample=process_sample, hooks=hooks)  # fmt: skip
    # (RUSAGE_CHILDREN counts every child this process has reaped: a pair's second
    # study in the same process would count the first's solvers too)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0, wall0 = os.getloadavg()[0], time.perf_counter()
    trainer.train()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    if clock.first is None or clock.steps != setup.steps:
        raise RuntimeError(f"{clock.steps} of {setup.steps} steps ran")
    records = launcher.state_dict()
    from melissa_trainer.launcher.simulation_record import records_of

    table = records_of(records)
    parameters = [table[sid]["parameters"] for sid in sorted(table)]
    return {"steps_per_second": clock.steps / (clock.last - clock.first),
            "steps_per_cpu_second": clock.steps / (clock.last_cpu - clock.first_cpu),
            # the training thread's CPU and the sampler's in the same span (wherever it
            # ran): what the acquisition adds to the steps, without the process's
            # pollers, whose CPU follows the wall time (and so the machine's load)
            "steps_per_step_cpu_second": clock.steps / (clock.last_thread - clock.first_thread
                                                        + clock.last_sampler
                                                        - clock.first_sampler),
            "sampler_cpu_seconds": clock.last_sampler - clock.first_sampler,
            "sampler_cpu_seconds_outside": sampler_clock.seconds - clock.last_sampler
                                           + clock.first_sampler,
            "draws": parameters,
            "steps": clock.steps, "trace": clock.trace, "data_calls": data["calls"],
            "data_cpu": data["cpu"],
            "data_threads": len(data["threads"]),
            "children_cpu": children.ru_utime + children.ru_stime - before.ru_utime
                            - before.ru_stime,
            "load": [load0, os.getloadavg()[0]],
            "study_wall": time.perf_counter() - wall0,
            "span_wall": clock.last - clock.first,
            "span_thread": clock.last_thread - clock.first_thread,
            "stream_end": clock.stream_end,
            "reference_rate": clock.reference.rate if clock.reference else None,
            "parts": parts_clock.figures() if parts_clock is not None else None,
            }  # fmt: skip


def steps_and_cpu(run: dict[str, Any]) -> tuple[int, float]:
    """A study's steps and the CPU-seconds of its training thread and sampler over them."""
    return run["steps"], run["span_thread"] + run["sampler_cpu_seconds"]


def free_draws(setup: bench.Setup, kind: str, seed: int) -> list[dict[str, float]]:
    """`setup.simulations` draws of a fresh `kind` sampler that observes nothing: the
    simulations both arms of an A/A pair run."""
    sampler = bench.make_arm(setup, kind, seed)
    return [dict(sampler.draw()) for _ in range(setup.simulations)]


def spec(setup: bench.Setup, seed: int, draws: list[dict[str, float]] | str | None, work: Path,
         kind: str = "surrogate", forced: list[dict[str, float]] | None = None,
         pin: bool = False, ratio: float | None = None,
         reference: dict[str, Any] | None = None,
         parts: bool = False) -> dict[str, Any]:  # fmt: skip
    """`study`'s arguments as JSON (for `children`); `draws` may be `PREVIOUS`."""
    return {"setup": asdict(setup), "seed": seed, "draws": draws, "work": str(work),
            "kind": kind, "forced": forced, "pin": pin, "ratio": ratio,
            "reference": reference, "parts": parts}  # fmt: skip


def children(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The studies of `specs` (`spec`'s), one after the other in one fresh process."""
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(specs)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"study failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    runs = json.loads(out.stdout.strip().splitlines()[-1])
    assert isinstance(runs, list)
    return runs


def child(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """One study (`spec`'s arguments) in its own process."""
    return children([spec(*args, **kwargs)])[0]


def run_specs(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`children`'s side: each study of `specs` in turn, in this process (draws
    `PREVIOUS`: the previous study's)."""
    runs: list[dict[str, Any]] = []
    for s in specs:
        draws = runs[-1]["draws"] if s["draws"] == PREVIOUS else s["draws"]
        setup = bench.Setup(**s["setup"])
        runs.append(study(setup, s["seed"], draws, Path(s["work"]), s["kind"], s["forced"],
                          s["pin"], s["ratio"], s["reference"], s.get("parts", False)))  # fmt: skip
    return runs


def main() -> None:
    import cost_spread  # (here, not above: it imports this module)

    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--space", choices=sorted(bench.SPACES), default="wide")
    p.add_argument("--pairs", type=int, default=None, help="on/off pairs (default 5; quick 1)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--simulations", type=int, default=48)
    p.add_argument("--sampler", choices=("surrogate", "density"), default="surrogate",
                   help="the adaptive sampler measured: the Gaussian-process acquisition "
                        "or the high-loss density (DensitySampler)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks, no figure")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--aa",
        choices=("off", "on"),
        default=None,
        help="A/A pairs instead (both arms the same code): their spread",
    )
    p.add_argument(
        "--designs", default="old", help="with --aa: cost_spread.DESIGNS' keys, comma-separated"
    )
    p.add_argument("--design", default=cost_spread.DEFAULT_DESIGN,
                   help="cost_spread.DESIGNS' key of the on / off pairs (default: the one "
                        "chosen on A/A pairs)")  # fmt: skip
    p.add_argument("--child", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        print(to_json(run_specs(json.loads(opts.child))))
        return
    setup = bench.Setup(space=opts.space, steps=opts.steps, simulations=opts.simulations)
    if opts.quick:  # 10 simulations of 5 steps: the acquisition draws a few
        setup = replace(setup, grid_size=6, time_steps=5, hidden=16, simulations=10, steps=200,
                        batch_size=8, watermark=8)  # fmt: skip
    pairs = opts.pairs or (1 if opts.quick else 5)
    work = Path(tempfile.mkdtemp(prefix="h46-cost-"))
    if opts.aa:
        try:
            cost_spread.main_aa(setup, opts.aa, opts.designs.split(","), pairs, work,
                                opts.sampler, opts.json)  # fmt: skip
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    print(f"{opts.space} space, {setup.simulations} simulations, {setup.steps} steps per "
          f"study, {pairs} pair(s) on / off interleaved, design {opts.design!r} (the machine "
          "may be busy)")  # fmt: skip
    ons, offs = [], []
    try:
        replayed: list[dict[str, float]] = []
        for i in range(pairs):
            on, off = cost_spread.run_pair(setup, i, replayed, work / str(i), opts.sampler,
                                           cost_spread.DESIGNS[opts.design])  # fmt: skip
            replayed = on["draws"]
            ons.append(on)
            offs.append(off)
            print(cost_spread.pair_line(i, on, off), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = cost_spread.on_off_rows(ons, offs, f"{opts.space}, trainer steps", opts.sampler)
    print_rows(rows, f"{opts.sampler} sampler: its cost on the trainer", width=60)
    if opts.json:
        print(to_json({"rows": rows}))


if __name__ == "__main__":
    main()
