"""The per-simulation losses' parts on the training thread (issue 46, the acquisition's
cost), this checkout's code against a baseline's, timed on the very same steps.

One tracked in-process run of `surrogate_cost.py`'s model and batch (the 12-parameter
heat study's MLP, 32 samples a batch, a reduction every 20 steps; the samples from
memory, 48 simulations of 20 time steps, so that nothing but the trainer runs). On
every step, after the forward pass, both codes compute the part, in a random order,
each timed with the thread's CPU clock (per step: the median call, times the calls a
step makes, the first tenth of the run left out; the mean printed beside):

- **losses**: the per-sample losses of the step's outputs, as the trainer's step makes
  them when only the tracker listens: a code with `deferred_sample_losses` defers them
  (keeps the elementwise losses; their mean per sample is taken in the reduction), one
  with `step_sample_losses` only computes them, a baseline without either computes
  ``per_sample_losses`` of the detached outputs under ``torch.no_grad``. A code with
  `fused_mse_loss` (issue 46's eighth round) computes them with the step's own loss, one
  elementwise operator for both, whose cost is the difference of two losses and their
  backward passes, not a call of its own: `tracking_step.py` measures it in the whole
  step; here such a code's `deferred_sample_losses` is timed, as before it;
- **record**: `SimulationLosses.record` of those losses and the batch's ids;
- **reduce**: `SimulationLosses.reduce`, every 20 steps (per step: its CPU / 20), which
  computes the deferred losses of its period first;
- **feed**: what a `Study` does with a reduction's statistics on the training thread
  (`Study.observe_simulation_losses`: each simulation's relative loss, noted for the
  sampler by `PendingLosses.note` under the launcher's lock, lock left out), every 20
  steps (per step: its CPU / 20); a code without `launcher/pending_losses.py` is
  refused.

Their results are compared bit for bit (the losses where both codes computed them at
the step, every reduction's statistics as `float.hex`): a difference stops the run.
Both codes share one process, so a busy machine slows both
alike; the first of the two calls of a step finds colder caches, hence the random
order. Figures: each part's CPU per step and the four together, medians over the
runs. Not measured here: the sampler (`surrogate_cost.py` prints
its CPU per study) and the hand-over of the losses to the tracker (the hook dispatch;
`tracking_step.py` measures the whole tracked step).

    # the baseline: another checkout's package, e.g. main's
    git archive main melissa_trainer | tar -x -C /tmp/base
    python benchmarks/tracking_parts.py --baseline /tmp/base/melissa_trainer --json
    python benchmarks/tracking_parts.py --quick    # tiny: checks, no figure
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import active_sampling as bench  # noqa: E402
from report import print_rows  # noqa: E402

import melissa_trainer  # noqa: E402
from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.common.json_output import to_json  # noqa: E402
from melissa_trainer.core import loss_per_simulation, sample_losses  # noqa: E402
from melissa_trainer.launcher import DensitySampler  # noqa: E402
from melissa_trainer.launcher.pending_losses import PendingLosses  # noqa: E402
from melissa_trainer.trainer.loss_inputs import inputs_targets  # noqa: E402
from melissa_trainer.trainer.losses import TrainerLosses  # noqa: E402

PARTS = ("losses", "record", "reduce", "feed")
EVERY = 20  # steps between reductions (the default `simulation_loss_steps`)


def load(package: Path, name: str, layer: str = "core") -> ModuleType:
    """`package`/`layer`/`name`.py as a module of its own (the baseline's)."""
    spec = importlib.util.spec_from_file_location(
        f"baseline_{name}", package / layer / f"{name}.py"
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"no {name}.py under {package}/{layer}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def load_baseline(package: Path) -> dict[str, ModuleType]:
    """The baseline's `sample_losses`, `period_losses` and `loss_sums` (where it has
    them) and `loss_per_simulation`, each bound to the others (their imports of
    ``melissa_trainer.core.<name>`` are pointed at the baseline's while they load: a
    deferred loss of one code is not the other's class)."""
    saved: dict[str, Any] = {}
    modules: dict[str, ModuleType] = {}
    try:
        for name in ("sample_losses", "period_losses", "loss_sums", "loss_per_simulation"):
            if not (package / "core" / f"{name}.py").exists():
                continue
            modules[name] = load(package, name)
            full = f"melissa_trainer.core.{name}"
            saved.setdefault(full, sys.modules.get(full))
            sys.modules[full] = modules[name]
    finally:
        for full, module in saved.items():
            if module is None:
                sys.modules.pop(full, None)
            else:
                sys.modules[full] = module
    # (its imports, the adaptive sampler's class, are this checkout's: the same sampler)
    modules["pending_losses"] = load(package, "pending_losses", "launcher")
    return modules


def losses_of(module: ModuleType) -> Any:
    """A code's per-sample losses of a step's (outputs, targets), as its trainer's step
    gives them to a tracker listening alone."""
    if hasattr(module, "deferred_sample_losses"):
        return lambda o, t: module.deferred_sample_losses(F.mse_loss, o, t)
    if hasattr(module, "step_sample_losses"):
        return lambda o, t: module.step_sample_losses(F.mse_loss, o, t)

    def before(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return module.per_sample_losses(F.mse_loss, outputs.detach(), targets)

    return before


def statistics_of(updated: dict[int, Any]) -> list[tuple[Any, ...]]:
    return [(k, v.draws, v.mean.hex(), v.relative.hex(), v.step) for k, v in updated.items()]


def run(baseline: Path, steps: int, seed: int) -> dict[str, dict[str, list[int]]]:
    """One tracked run; per code ("ours", "baseline") and part, the CPU of each call (ns)."""
    with tempfile.TemporaryDirectory(prefix="h46-parts-") as work:  # (the trainer's output)
        return _run(baseline, steps, seed, Path(work))


def _run(baseline: Path, steps: int, seed: int, work: Path) -> dict[str, dict[str, list[int]]]:
    torch.set_num_threads(1)
    base = load_baseline(baseline)
    codes = {
        "ours": (losses_of(sample_losses), loss_per_simulation.SimulationLosses),
        "baseline": (
            losses_of(base["sample_losses"]),
            base["loss_per_simulation"].SimulationLosses,
        ),
    }
    # the feed's: each code's pending losses, of one adaptive sampler and the records of
    # the 48 simulations (`note` reads their ids only)
    pending = {"ours": PendingLosses(), "baseline": base["pending_losses"].PendingLosses()}
    sampler = DensitySampler({"a": (0.0, 1.0)}, seed=0)
    records: dict[int, Any] = dict.fromkeys(range(48))
    cpu = torch.device("cpu")
    tracked = {code: cls(cpu, False) for code, (_, cls) in codes.items()}
    times: dict[str, dict[str, list[int]]] = {c: {p: [] for p in PARTS} for c in codes}
    order = random.Random(seed)
    clock = time.thread_time_ns
    done = [0]

    def sample_loss_mean(self: Any, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = inputs_targets(batch, "compute_sample_losses", self.dataset)
        outputs = model(inputs)
        names = list(codes)
        order.shuffle(names)
        got: dict[str, Any] = {}
        for code in names:
            start = clock()
            got[code] = codes[code][0](outputs, targets)
            times[code]["losses"].append(clock() - start)
        both = all(isinstance(x, torch.Tensor) for x in got.values())  # (not deferred)
        if both and not torch.equal(got["ours"], got["baseline"]):
            raise SystemExit("the per-sample losses differ between the codes")
        ids = self.dataset.last_simulation_ids
        for code in names:
            start = clock()
            tracked[code].record(ids, got[code])
            times[code]["record"].append(clock() - start)
        done[0] += 1
        if done[0] % EVERY == 0:
            reduced: dict[str, Any] = {}
            for code in names:
                start = clock()
                reduced[code] = tracked[code].reduce(done[0])
                times[code]["reduce"].append(clock() - start)
            if statistics_of(reduced["ours"]) != statistics_of(reduced["baseline"]):
                raise SystemExit(f"the reductions of step {done[0]} differ between the codes")
            noted: dict[str, Any] = {}
            for code in names:
                start = clock()
                # (`Study.observe_simulation_losses`, then `StudyRecord.observe`'s note)
                relative = {sid: loss.relative for sid, loss in reduced[code].items()}
                noted[code] = pending[code].note(sampler, records, relative)
                times[code]["feed"].append(clock() - start)
            if noted["ours"] != noted["baseline"] or (
                pending["ours"]._losses != pending["baseline"]._losses
            ):
                raise SystemExit(f"the losses noted at step {done[0]} differ between the codes")
            for code in names:
                pending[code].clear()  # (the sampler's next draw takes them: not timed)
        self._sample_losses = got["ours"]  # (the run's own tracker: the same in both)
        return self.loss_fn(outputs, targets)

    setup = bench.Setup(space="wide")
    data = bench.memory_samples(setup, seed)
    n = len(data)
    model = bench.make_model(setup, seed)
    args = TrainingArguments(
        output_dir=str(work), seed=seed, batch_size=setup.batch_size,
        buffer="reservoir", buffer_size=n, watermark=n, max_steps=steps, pseudo_epochs=10**6,
        report_to="none", disable_progress_bar=True, save_at_end=False, logging_steps=10**9,
        simulation_loss_steps=EVERY,
    )  # fmt: skip
    trainer = OnlineTrainer(model, args, torch.optim.Adam(model.parameters(), lr=1e-3),
                            train_source=iter(data),
                            process_sample=lambda s: (torch.from_numpy(s["x"]),
                                                      torch.from_numpy(s["y"])))  # fmt: skip
    original = TrainerLosses._sample_loss_mean
    # the step's loss when the losses are tracked (`train` picks it): both codes' parts
    TrainerLosses._sample_loss_mean = sample_loss_mean  # type: ignore[method-assign]
    try:
        trainer.train()
    finally:
        TrainerLosses._sample_loss_mean = original  # type: ignore[method-assign]
    if done[0] != steps:
        raise SystemExit(f"{done[0]} of {steps} steps ran")
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--baseline", type=Path, default=None,
                   help="the baseline's melissa_trainer folder (default: this one's)")  # fmt: skip
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="tiny: checks the pipeline, no figure")
    p.add_argument("--json", action="store_true")
    opts = p.parse_args()
    baseline = opts.baseline or Path(melissa_trainer.__file__).parent
    steps, runs = (60, 1) if opts.quick else (opts.steps, opts.runs)
    print(f"{runs} run(s) of {steps} tracked steps; baseline {baseline} (the machine may be "
          "busy: both codes alike)")  # fmt: skip
    per_step: dict[str, dict[str, list[float]]] = {
        c: {part: [] for part in (*PARTS, "total")} for c in ("ours", "baseline")
    }
    for i in range(runs):
        times = run(baseline, steps, seed=i)
        for code, parts in times.items():
            total = 0.0
            for part, calls in parts.items():
                calls = calls[len(calls) // 10 :]  # the first tenth: warming up
                # per step: the median call (robust to the machine's preemptions) times
                # the calls a step makes; the mean beside
                per = 1.0 / EVERY if part in ("reduce", "feed") else 1.0
                median = statistics.median(calls) * per / 1e3  # microseconds per step
                mean = statistics.mean(calls) * per / 1e3
                per_step[code][part].append(median)
                total += median
                print(f"run {i} {code:8s} {part:6s} {median:7.1f} us a step (mean "
                      f"{mean:7.1f})")  # fmt: skip
            per_step[code]["total"].append(total)
    rows = []
    for part in (*PARTS, "total"):
        ours = statistics.median(per_step["ours"][part])
        base = statistics.median(per_step["baseline"][part])
        rows.append({"case": f"tracking's {part} on the training thread, CPU per step "
                             f"(median of {runs} runs)",
                     "ours": round(ours, 2), "baseline": round(base, 2), "unit": "us/step",
                     "ratio": round(base / ours, 3) if ours > 0 else None,
                     "target": None})  # fmt: skip
    print_rows(rows, "per-simulation losses: the trainer's parts", width=60)
    if opts.json:
        print(to_json({"rows": rows}))


if __name__ == "__main__":
    main()
