"""Online's training against offline's at equal steps, off the clock, over several seeds.

`online_vs_offline.py`'s equal-wall-time row mixes three things: how many steps each
pipeline gets in its budget, how many simulations it trains on, and how well its
training uses a step. This script holds the first two fixed to isolate the third, and
measures how much one run's result moves with the seed. Everything is
`online_vs_offline.py`'s (`heat_pipelines`: the solver, the Halton design, the MLP,
Adam, the cosine decay, batch 32, the 16 held-out simulations), in one process, one
torch thread, with no simulations running and no wall-clock budget:

* **offline** (the baseline): the first ``--offline_simulations`` simulations of the
  design (default 231: offline's best split in the quiet run of 2026-11-29), read into
  memory and drawn in shuffled epochs (`heat_offline.MemoryBatches`, as `train_offline`);
* **online** (ours): ``--online_simulations`` (default 607: online's in that run), put
  in order, evenly over the steps, into the buffer `OnlineTrainer` builds for these
  arguments (a reservoir of 10,000 samples, watermark 1,000, stored by column), each
  batch drawn with `get_block` and made by the benchmark's `process_batch`: the
  trainer's data path without the stream's clock;

both for ``--steps`` optimizer steps (default 36,000: the two pipelines' 35,336 and
37,048 in that run), the learning rate decayed over the steps. Each ``--seeds`` value
seeds the model's initial weights, offline's shuffles and online's buffer (the data and
the held-out set stay seed 0's, `online_vs_offline.py`'s default); the two pipelines
alternate, seed by seed. Rows: the median over seeds of each pipeline's validation
MSE (ratio offline / online, higher is better for online), and the per-seed ratios'
spread. Also printed: what online's last draws came from (distinct simulations, share
of the last 100 streamed), from a draw of as many samples as the buffer holds after
the last step.

Online's reservoir policy (`ReservoirBuffer`'s ``draw_choices`` / ``evict_choices``)
is an arm: ``--policies 1/1,4/1`` trains online once per policy and seed (the first,
by default ``1/1``, uniform draws and evictions, is the rows' online; each other gets
a row against it); ``--skip_offline`` leaves offline out (its figure is the same in
every run: no clock), so that policies can run a process each. ``--draws_only``
trains nothing: it runs each policy's puts and draws alone (seconds) and prints the
learning-rate-weighted draws of each tenth of the simulations, in stream order, as a
share of the mean (offline's epochs give every simulation 1.0).

The schedule is an arm too: ``--stream_fraction F`` ends online's stream at F of the
steps (its samples put evenly over them; the rest replays the buffer as it ends), and
``--decay_from D`` (online) and ``--offline_decay_from D`` (offline) hold the learning
rate until D of the steps, then decay it along a half cosine to 0 (the library's
`budget_factor`; 0, the default: the cosine over all the steps). ``--skip_online``
leaves online out.

    python benchmarks/heat_equal_steps.py --skip_offline --stream_fraction 0.8 --decay_from 0.8
    python benchmarks/heat_equal_steps.py --seeds 0 --skip_online --offline_decay_from 0.6
    python benchmarks/heat_equal_steps.py            # 3 seeds: ~12 min on a quiet core
    python benchmarks/heat_equal_steps.py --seeds 1 --policies 4/1 --skip_offline
    python benchmarks/heat_equal_steps.py --draws_only --policies 1/1,2/1,4/1 --seeds 0
    python benchmarks/heat_equal_steps.py --seeds 1  # one seed (a process per seed: side by side)
    python benchmarks/heat_equal_steps.py --quick    # seconds: checks the pipelines
    python benchmarks/heat_equal_steps.py --json     # last line {"rows": [...]}
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heat_offline  # noqa: E402
import heat_pipelines as hp  # noqa: E402
from report import add_flags, print_json, print_rows  # noqa: E402

from melissa_trainer import TrainingArguments  # noqa: E402
from melissa_trainer.buffers import make_buffer  # noqa: E402


def simulate(setup: hp.Setup, n: int) -> list[dict[str, np.ndarray]]:
    """The first `n` simulations of the design, in order, as the receiver delivers
    their samples (one dict per time step, every field an array) with a
    ``simulation`` field (its index in the design) to account for the buffer."""
    samples = []
    for k, parameters in enumerate(hp.design(setup, n)):
        vector = np.array([parameters[name] for name in hp.NAMES])
        for step, field in enumerate(hp.solve(parameters, setup.config)):
            samples.append({"temperature": np.asarray(field, dtype=np.float32),
                            "time_step": np.array(step), "parameters": vector,
                            "simulation": np.array(k)})  # fmt: skip
    return samples


def train(
    setup: hp.Setup, steps: int, batches: Any, validation: tuple[torch.Tensor, torch.Tensor],
    decay_from: float = 0.0,
) -> tuple[torch.nn.Module, float]:  # fmt: skip
    """`steps` Adam steps of `setup`'s model on `batches(step) -> (x, y)`, the learning
    rate held to `decay_from` of the steps, then decayed (`heat_shared.learning_rate`);
    the model and its validation MSE (K^2)."""
    torch.manual_seed(setup.seed)  # (make_model seeds it too: the same initial weights)
    model = hp.make_model(setup)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = hp.learning_rate(setup, step / steps, decay_from)
        x, y = batches(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model, hp.validation_mse(model, *validation)


def offline(
    setup: hp.Setup, samples: list[dict[str, np.ndarray]], n_simulations: int, steps: int,
    validation: tuple[torch.Tensor, torch.Tensor], decay_from: float = 0.0,
) -> dict[str, Any]:  # fmt: skip
    """Epochs over the first `n_simulations`' samples in memory (`MemoryBatches`), the
    rate held to `decay_from` of the steps, then decayed."""
    kept = samples[: n_simulations * setup.time_steps]
    x, y = hp.batch_features(
        np.stack([s["parameters"] for s in kept]),
        np.array([int(s["time_step"]) for s in kept]),
        np.stack([s["temperature"] for s in kept]),
        setup.time_steps,
    )
    generator = torch.Generator().manual_seed(setup.seed)
    epochs = iter(())

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal epochs
        batch = next(epochs, None)
        if batch is None:  # a new epoch, a new permutation
            epochs = iter(heat_offline.MemoryBatches(x, y, setup.batch_size, generator))
            batch = next(epochs)
        return batch

    start = time.perf_counter()
    _, mse = train(setup, steps, batches, validation, decay_from)
    return {"val_mse": mse, "simulations": n_simulations, "seconds": time.perf_counter() - start}


def online(
    setup: hp.Setup, samples: list[dict[str, np.ndarray]], steps: int,
    validation: tuple[torch.Tensor, torch.Tensor], workdir: str,
    draw_choices: int = 1, evict_choices: int = 1, stream_fraction: float = 1.0,
    decay_from: float = 0.0,
) -> dict[str, Any]:  # fmt: skip
    """`samples` put in order, evenly over the first `stream_fraction` of the steps (the
    watermark's, or a batch's, first), into the buffer `OnlineTrainer` builds
    (`TrainingArguments.buffer_config`, columnar as for a `process_batch`); each batch
    one `get_block` made by the benchmark's `process_batch` (after the stream, the
    buffer as it ends, replayed); the rate held to `decay_from` of the steps, then
    decayed."""
    args = TrainingArguments(output_dir=workdir, seed=setup.seed, batch_size=setup.batch_size,
                             buffer="reservoir", buffer_size=setup.buffer_size,
                             watermark=setup.watermark, sample_to_insert_ratio=0)  # fmt: skip
    config = dataclasses.replace(args.buffer_config(), draw_choices=draw_choices,
                                 evict_choices=evict_choices)  # fmt: skip
    buffer = make_buffer(config, columnar=True)
    process_batch = hp.make_process_batch(setup.time_steps)
    put = 0
    streamed = max(1, round(stream_fraction * steps))  # the steps the stream lasts

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal put
        due = max(setup.watermark, setup.batch_size, len(samples) * (step + 1) // streamed)
        while put < min(due, len(samples)):  # (a full buffer takes what it can)
            put += buffer.put_available(samples[put:due])
        return process_batch(buffer.get_block(setup.batch_size))

    start = time.perf_counter()
    _, mse = train(setup, steps, batches, validation, decay_from)
    seconds = time.perf_counter() - start
    # what the last draws came from: a large draw from the buffer as it ends
    drawn = buffer.get_block(len(buffer)).fields["simulation"]
    last = int(samples[-1]["simulation"]) + 1
    return {"val_mse": mse, "simulations": last, "seconds": seconds,
            "distinct_simulations_drawn": len(np.unique(drawn)),
            "share_of_last_100": float(np.mean(drawn >= last - 100))}  # fmt: skip


def draw_shares(
    setup: hp.Setup, n_simulations: int, steps: int, draw_choices: int, evict_choices: int,
    stream_fraction: float = 1.0, decay_from: float = 0.0,
) -> tuple[list[float], float]:  # fmt: skip
    """Online's draws without the training: the same buffer, puts and `get_block` calls
    as `online` (samples reduced to their simulation index: the draws do not depend on
    the content), each drawn sample weighted by the step's learning rate (relative to
    the first). Returns the rate-weighted draws of each tenth of the simulations, in
    stream order, as a share of the mean over all of them (1.0: its share, what
    offline's epochs give every simulation), and the seconds taken."""
    args = TrainingArguments(output_dir=".", seed=setup.seed, batch_size=setup.batch_size,
                             buffer="reservoir", buffer_size=setup.buffer_size,
                             watermark=setup.watermark, sample_to_insert_ratio=0)  # fmt: skip
    config = dataclasses.replace(args.buffer_config(), draw_choices=draw_choices,
                                 evict_choices=evict_choices)  # fmt: skip
    buffer = make_buffer(config, columnar=True)
    samples = [{"simulation": np.array(k)} for k in range(n_simulations)
               for _ in range(setup.time_steps)]  # fmt: skip
    weight = np.zeros(n_simulations)
    put = 0
    streamed = max(1, round(stream_fraction * steps))
    start = time.perf_counter()
    for step in range(steps):
        due = max(setup.watermark, setup.batch_size, len(samples) * (step + 1) // streamed)
        while put < min(due, len(samples)):
            put += buffer.put_available(samples[put:due])
        drawn = buffer.get_block(setup.batch_size).fields["simulation"]
        rate = hp.learning_rate(setup, step / steps, decay_from) / setup.learning_rate
        np.add.at(weight, drawn, rate)
    share = weight / weight.mean()
    tenths = [float(part.mean()) for part in np.array_split(share, 10)]
    return tenths, time.perf_counter() - start


def _arm(draw_choices: int, evict_choices: int) -> str:
    """The result key of online's arm with this policy (the default's: ``online``)."""
    if (draw_choices, evict_choices) == (1, 1):
        return "online"
    return f"online draw_choices={draw_choices} evict_choices={evict_choices}"


def parse_policies(
    p: argparse.ArgumentParser, text: str, flag: str = "--policies"
) -> list[tuple[int, int]]:
    """Comma-separated DRAW/EVICT choice counts (EVICT 1 when left out); `flag` names the
    option in the errors."""
    out = []
    for item in text.split(","):
        draw, _, evict = item.strip().partition("/")
        try:
            pair = (int(draw), int(evict or 1))
        except ValueError:
            p.error(f"{flag}: {item!r} is not DRAW/EVICT (two counts >= 1, e.g. 2/1)")
        if min(pair) < 1:
            p.error(f"{flag}: {item!r}: both counts must be >= 1")
        out.append(pair)
    if len(set(out)) != len(out):
        p.error(f"{flag} {text!r} names a policy twice")
    return out


def policy_row(results: list[dict[str, Any]], arm: str, base: str) -> dict[str, Any]:
    """One policy's online against the first policy's: medians over seeds (ratio
    first / this: higher is better for this policy), the worst seed in the case."""
    ours = statistics.median(r[arm]["val_mse"] for r in results)
    baseline = statistics.median(r[base]["val_mse"] for r in results)
    worst = min(r[base]["val_mse"] / r[arm]["val_mse"] for r in results)
    vs = ""
    if "offline" in results[0]:
        off = statistics.median(r["offline"]["val_mse"] for r in results)
        vs = f"; offline / this {off / ours:.3f}"
    return {"case": f"equal steps: {arm} / {base}, median of {len(results)} seeds (lowest "
                    f"per-seed ratio {worst:.3f}{vs})",
            "ours": round(ours, 4), "baseline": round(baseline, 4), "unit": "K^2",
            "ratio": round(baseline / ours, 3), "target": None}  # fmt: skip


def rows(
    results: list[dict[str, Any]], opts: argparse.Namespace, setup: hp.Setup
) -> list[dict[str, Any]]:
    first = next(k for k in results[0] if k.startswith("online"))
    on = statistics.median(r[first]["val_mse"] for r in results)
    off = statistics.median(r["offline"]["val_mse"] for r in results)
    ratios = [r["offline"]["val_mse"] / r[first]["val_mse"] for r in results]
    offs = [r["offline"]["val_mse"] for r in results]
    n = len(results)
    return [
        {"case": f"equal steps ({opts.steps:,}): val MSE, offline ({opts.offline_simulations} "
                 f"simulations, epochs) / online ({opts.online_simulations}, reservoir of "
                 f"{setup.buffer_size:,}), "
                 f"median of {n} seeds", "ours": round(on, 4), "baseline": round(off, 4),
         "unit": "K^2", "ratio": round(off / on, 3), "target": None},
        {"case": f"equal steps: the per-seed ratio's lowest / highest ({n} seeds)",
         "ours": round(max(ratios), 4), "baseline": round(min(ratios), 4), "unit": "ratio",
         "ratio": round(min(ratios) / max(ratios), 3), "target": None},
        {"case": f"seed noise: offline's val MSE, lowest / highest of {n} seeds",
         "ours": round(max(offs), 4), "baseline": round(min(offs), 4), "unit": "K^2",
         "ratio": round(min(offs) / max(offs), 3), "target": None},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, help="optimizer steps of each run (default 36000)")
    p.add_argument("--seeds", default="0,1,2", help="training seeds, comma-separated")
    p.add_argument("--offline_simulations", type=int, default=231)
    p.add_argument("--online_simulations", type=int, default=607)
    p.add_argument("--buffer_size", type=int, help=(
        "online's reservoir, samples (default 10000, online_vs_offline.py's; one that "
        "holds the whole stream, 60700, keeps no window)"))  # fmt: skip
    p.add_argument("--policies", default="1/1", help=(
        "online's reservoir draw / eviction policies, comma-separated DRAW/EVICT pairs: "
        "DRAW the buffer's draw_choices (each draw the least drawn of DRAW random "
        "samples; 1: uniform), EVICT its evict_choices (each eviction the most drawn of "
        "EVICT random drawn samples; 1: uniform); the first is the rows' online, each "
        "other gets a row against it"))  # fmt: skip
    p.add_argument("--stream_fraction", type=float, default=1.0, help=(
        "online: the stream ends at this fraction of the steps, the rest replays the "
        "buffer as it ends (default 1: the stream lasts the whole run)"))  # fmt: skip
    p.add_argument("--decay_from", type=float, default=0.0, help=(
        "online: the learning rate held to this fraction of the steps, then a cosine "
        "decay to 0 (default 0: the cosine decay over the whole run)"))  # fmt: skip
    p.add_argument("--offline_decay_from", type=float, default=0.0, help=(
        "offline: the same, for offline's rate"))  # fmt: skip
    p.add_argument("--skip_online", action="store_true", help="offline's arm only")
    p.add_argument("--skip_offline", action="store_true", help=(
        "online's arms only (a policy against another, per seed; offline's figure is the "
        "same in every run: no clock)"))  # fmt: skip
    p.add_argument(
        "--draws_only",
        action="store_true",
        help=("no training: each policy's rate-weighted draws per simulation (seconds)"),
    )
    add_flags(p, quick="tiny sizes: checks, no figures")
    opts = p.parse_args(argv)
    torch.set_num_threads(1)
    setup = hp.Setup()
    if opts.quick:
        setup = hp.Setup(grid_size=8, time_steps=10, hidden=32, buffer_size=100, watermark=20,
                         n_validation=2)  # fmt: skip
        opts.offline_simulations, opts.online_simulations = 3, 8
    opts.steps = opts.steps or (40 if opts.quick else 36_000)
    if opts.buffer_size is not None:
        setup = hp.Setup(**{**setup.__dict__, "buffer_size": opts.buffer_size})
    if opts.offline_simulations > opts.online_simulations:
        p.error("--offline_simulations must be at most --online_simulations (a prefix of them)")
    policies = parse_policies(p, opts.policies)
    if not 0 < opts.stream_fraction <= 1:
        p.error(f"--stream_fraction must be in (0, 1], not {opts.stream_fraction}")
    for flag in ("decay_from", "offline_decay_from"):
        if not 0 <= getattr(opts, flag) < 1:
            p.error(f"--{flag} must be in [0, 1), not {getattr(opts, flag)}")
    if opts.skip_online and opts.skip_offline:
        p.error("--skip_online and --skip_offline leave nothing to run")
    if opts.draws_only:
        seeds = [int(x) for x in opts.seeds.split(",")]
        print(f"rate-weighted draws of each tenth of the simulations, in stream order, as "
              f"a share of the mean ({opts.steps:,} steps, {opts.online_simulations} "
              f"simulations, reservoir of {setup.buffer_size:,}; offline's epochs: 1.0 "
              "each):")  # fmt: skip
        for d, e in policies:
            for seed in seeds:
                seeded = hp.Setup(**{**setup.__dict__, "seed": seed})
                tenths, seconds = draw_shares(seeded, opts.online_simulations, opts.steps, d, e,
                                              opts.stream_fraction, opts.decay_from)  # fmt: skip
                print(f"  {_arm(d, e)}, seed {seed}: "
                      f"{' '.join(f'{t:.2f}' for t in tenths)} ({seconds:.0f} s)",
                      flush=True)  # fmt: skip
        return
    # (offline's arm alone needs its prefix only)
    samples = simulate(
        setup, opts.offline_simulations if opts.skip_online else opts.online_simulations
    )
    validation = hp.validation_set(setup)
    results = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="heat-equal-steps-") as workdir:
        for seed in (int(s) for s in opts.seeds.split(",")):
            seeded = hp.Setup(**{**setup.__dict__, "seed": seed})
            result: dict[str, Any] = {"seed": seed}
            if not opts.skip_offline:
                off = offline(seeded, samples, opts.offline_simulations, opts.steps, validation,
                              opts.offline_decay_from)  # fmt: skip
                result["offline"] = off
                print(f"seed {seed}: offline {off['val_mse']:.4g} K^2 ({off['seconds']:.0f} s)",
                      flush=True)  # fmt: skip
            for d, e in [] if opts.skip_online else policies:
                on = online(seeded, samples, opts.steps, validation, workdir, d, e,
                            opts.stream_fraction, opts.decay_from)  # fmt: skip
                result[_arm(d, e)] = on
                vs = ""
                if "offline" in result:
                    vs = f": offline / online {result['offline']['val_mse'] / on['val_mse']:.3f}"
                print(f"seed {seed}: {_arm(d, e)} {on['val_mse']:.4g} K^2 ({on['seconds']:.0f} s; "
                      f"its last draws from {on['distinct_simulations_drawn']} simulations, "
                      f"{on['share_of_last_100']:.0%} from the last 100){vs}",
                      flush=True)  # fmt: skip
            results.append(result)
    table = [] if opts.skip_offline or opts.skip_online else rows(results, opts, setup)
    for d, e in [] if opts.skip_online else policies[1:]:
        table.append(policy_row(results, _arm(d, e), _arm(*policies[0])))
    print_rows(table, "online vs offline at equal steps (ours = online)", width=100)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    if opts.json:
        print_json(table)


if __name__ == "__main__":
    main()
