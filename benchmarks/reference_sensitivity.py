"""Does the tracked trainer slow a stranger's step more than its own? (issue 46, tenth
round: why `surrogate_cost.py`'s reference-normalised row is void.)

`surrogate_cost.py` runs a **reference step** (`step_reference.StepReference`: a plain
step of a copy of the model on one fixed batch) every 10 steps on the training thread,
to normalise each study's rate by the machine's speed at those moments. On the quiet
machine the on arm slowed the reference by 8-12% while its own data path (the same
48,000 `process_sample` calls in both arms) cost the same (on / off 0.993 and 1.014).
Here, nothing but a trainer runs: `surrogate_cost.py`'s model and batch trained from
memory (48 simulations of 20 samples, as `tracking_step.py`), **on** tracking the
per-simulation losses (`simulation_loss_steps` 20), **off** not, each study in a fresh
interpreter, in alternating order (on, off; off, on; ...), a reference step every 10
steps. Per study: its steps per CPU-second of the training thread (the reference's CPU
taken out) and the reference's steps per CPU-second. Rows: on / off of each, medians of
the pairs' ratios (no target: a diagnostic). If the reference moves several times more
than the trainer's own steps, it measures what the on arm's work does to *its* working
set (a second model's weights and Adam state, evicted between its steps), not the
machine, and cannot normalise the on / off ratio.

    python benchmarks/reference_sensitivity.py --pairs 8 --json
    python benchmarks/reference_sensitivity.py --quick    # tiny: checks, no figure
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402

EVERY = 10  # steps between two reference steps, as surrogate_cost's design


def study(on: bool, seed: int, steps: int, kind: str = "step", offset: int = 0) -> dict[str, float]:
    """One trainer (module docstring) in this process: its rate and the reference's."""
    import active_sampling as bench
    import torch
    from step_reference import ComputeReference, StepReference, make_reference

    from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

    class Clock(Hook):
        def __init__(self, reference: StepReference | ComputeReference) -> None:
            self.reference, self.steps, self.reductions = reference, 0, 0
            self.first: float | None = None
            self.last = 0.0

        def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
            if self.first is None:
                self.first = time.thread_time()

        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            self.steps += 1
            if self.steps % EVERY == offset:
                self.reference.run()
            self.last = time.thread_time()

        def on_simulation_losses(self, trainer: Any, state: Any, control: Any,
                                 updated: Any) -> None:  # fmt: skip
            self.reductions += 1

    torch.set_num_threads(1)
    setup = bench.Setup(space="wide")
    data = bench.memory_samples(setup, seed)
    n = len(data)
    model = bench.make_model(setup, seed)
    clock = Clock(make_reference(kind, model, setup.batch_size))
    with tempfile.TemporaryDirectory(prefix="reference-sensitivity-") as work:
        args = TrainingArguments(
            output_dir=work, seed=seed, batch_size=setup.batch_size, buffer="reservoir",
            buffer_size=n, watermark=n, max_steps=steps, pseudo_epochs=10**6,
            report_to="none", disable_progress_bar=True, save_at_end=False,
            logging_steps=10**9, simulation_loss_steps=20 if on else 0,
        )  # fmt: skip
        trainer = OnlineTrainer(
            model, args, torch.optim.Adam(model.parameters(), lr=1e-3),
            train_source=iter(data), hooks=[clock],
            process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        )  # fmt: skip
        trainer.train()
    assert clock.first is not None and clock.steps == steps
    span = clock.last - clock.first - clock.reference.seconds
    return {"rate": clock.steps / span, "reference": clock.reference.rate,
            "reductions": clock.reductions}  # fmt: skip


def child(on: bool, seed: int, steps: int, kind: str, offset: int) -> dict[str, float]:
    spec = json.dumps({"on": on, "seed": seed, "steps": steps, "kind": kind, "offset": offset})
    out = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True,
                         text=True, check=False)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"a study failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--reference", choices=("step", "compute"), default="step",
                   help="the reference workload (step_reference.KINDS)")  # fmt: skip
    p.add_argument("--offset", type=int, choices=range(EVERY), default=0, metavar="0..9",
                   help="the reference runs after the steps whose number %% 10 is this (the "
                        "reductions: after multiples of 20)")  # fmt: skip
    p.add_argument("--child", help=argparse.SUPPRESS)
    add_flags(p, quick="tiny: checks the pipeline, no figure")
    opts = p.parse_args()
    if opts.child:
        spec = json.loads(opts.child)
        print(to_json(study(spec["on"], spec["seed"], spec["steps"], spec["kind"], spec["offset"])))
        return
    pairs, steps = (1, 60) if opts.quick else (opts.pairs, opts.steps)
    print(f"{pairs} on / off pair(s) of {steps} steps, fresh interpreters, alternate "
          f"orders, the {opts.reference!r} reference at offset {opts.offset} (the machine may "
          "be busy)")  # fmt: skip
    ratios: dict[str, list[float]] = {"rate": [], "reference": []}
    for i in range(pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        runs = {on: child(on, 100 + i, steps, opts.reference, opts.offset) for on in order}
        if not runs[True]["reductions"] or runs[False]["reductions"]:  # (else: A/A)
            raise SystemExit(f"pair {i}: the on arm must track, the off arm not: {runs}")
        for key, values in ratios.items():
            values.append(runs[True][key] / runs[False][key])
        print(f"pair {i}: own rate on / off {ratios['rate'][-1]:.3f} (on "
              f"{runs[True]['rate']:.0f}, off {runs[False]['rate']:.0f} steps/cpu-s); "
              f"reference on / off {ratios['reference'][-1]:.3f}; "
              f"{runs[True]['reductions']:.0f} reductions on", flush=True)  # fmt: skip
    rows = [
        {"case": f"{what}, tracked / untracked trainer (median of {pairs} pairs' ratios)",
         "ours": round(statistics.median(ratios[key]), 4), "baseline": 1.0, "unit": "ratio",
         "ratio": round(statistics.median(ratios[key]), 4), "target": None}
        for key, what in (("rate", "the trainer's own steps per CPU-second"),
                          ("reference", f"the {opts.reference!r} reference's runs per CPU-second"))
    ]  # fmt: skip
    finish(
        rows,
        "the reference's sensitivity to the tracked trainer",
        width=70,
        as_json=opts.json,
        table_too=True,
    )


if __name__ == "__main__":
    main()
