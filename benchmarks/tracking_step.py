"""The tracked step's extra CPU on the training thread (issue 46, the acquisition's
cost), this checkout's code against a baseline package's: a tracked trainer (on) and an
untracked one (off) run side by side, and what the first costs beyond the second.

One duel: two in-process trainers of `surrogate_cost.py`'s model and batch (the
12-parameter heat study's MLP, 32 samples a batch; the samples from memory, 48
simulations of 20 time steps, so that nothing but the trainers runs), the same seed,
weights and batches. **On** tracks the per-simulation losses (`simulation_loss_steps`
20) and feeds every reduction to an adaptive sampler's pending losses
(`PendingLosses.note`, as a `Study` does on rank 0); **off** tracks nothing. Each runs
on its own thread, and they take turns, 20 steps each (a baton: one reduction period),
so that both see the same machine; each period's CPU is its thread's
(`time.thread_time_ns`, from its first step's start to its last step's end: the
per-sample losses, their hand-over to the tracker, the reduction and the feed, the hook
dispatch, everything the loop does for them). The extra CPU per step: the median over
the periods of (on - off) / 20, the first tenth left out. Both trainers must end with
the same weights bit for bit (tracking never changes the training): a difference stops
the run.

Each code runs its duels in its own interpreter (the baseline's package first on
``PYTHONPATH``), in alternating order (ours, baseline; baseline, ours; ...); figures:
medians over the rounds. The target: the extra CPU halved against the baseline (issue
46's eighth round: the cost at the edge of 3%). Not measured here: the sampler's draws
(`sampler_parts.py`), the simulations and the receivers (`surrogate_cost.py`, the
whole study).

    git archive <commit> melissa_trainer | tar -x -C /tmp/base
    python benchmarks/tracking_step.py --baseline /tmp/base --json
    python benchmarks/tracking_step.py --quick    # tiny: checks, no figure
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PERIOD = 20  # steps a turn, and between reductions (the default `simulation_loss_steps`)
TARGET = 2.0  # baseline / ours: the extra CPU halved


class Baton:
    """Whose turn it is ("on" or "off"); a finished side hands it over for good."""

    def __init__(self) -> None:
        self.turn = "on"
        self.done: set[str] = set()
        self.cv = threading.Condition()

    @staticmethod
    def other(me: str) -> str:
        return "off" if me == "on" else "on"

    def wait(self, me: str) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.turn == me or self.other(me) in self.done)

    def give(self, me: str, finished: bool = False) -> None:
        with self.cv:
            if finished:
                self.done.add(me)
            self.turn = self.other(me)
            self.cv.notify_all()


def duel(steps: int, seed: int) -> dict[str, Any]:
    """One duel (module docstring): each side's CPU per period (ns), the weights' check."""
    import torch

    sys.path.insert(0, str(HERE))
    import active_sampling as bench

    from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
    from melissa_trainer.launcher import DensitySampler
    from melissa_trainer.launcher.pending_losses import PendingLosses

    class Turns(Hook):
        """Times each period of its side's thread and hands the baton over after it."""

        def __init__(self, me: str, baton: Baton) -> None:
            self.me, self.baton = me, baton
            self.periods: list[int] = []
            self.start: int | None = None

        def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
            self.baton.wait(self.me)

        def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
            if self.start is None:
                self.start = time.thread_time_ns()

        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            if state.global_step % PERIOD == 0 and self.start is not None:
                self.periods.append(time.thread_time_ns() - self.start)
                self.start = None
                self.baton.give(self.me)
                self.baton.wait(self.me)

    class Feed(Hook):
        """What a `Study` does with a reduction on rank 0 (the launcher's lock aside)."""

        def __init__(self) -> None:
            self.pending = PendingLosses()
            self.sampler = DensitySampler({"a": (0.0, 1.0)}, seed=0)
            self.records: dict[int, Any] = dict.fromkeys(range(48))

        def on_simulation_losses(self, trainer: Any, state: Any, control: Any,
                                 updated: Any) -> None:  # fmt: skip
            relative = {sid: loss.relative for sid, loss in updated.items()}
            self.pending.note(self.sampler, self.records, relative)
            self.pending.clear()  # (the sampler's next draw would take them)

    torch.set_num_threads(1)
    setup = bench.Setup(space="wide")
    data = bench.memory_samples(setup, seed)
    n = len(data)
    baton = Baton()
    sides: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tracking-step-") as work:
        for me in ("on", "off"):
            model = bench.make_model(setup, seed)
            turns = Turns(me, baton)
            args = TrainingArguments(
                output_dir=str(Path(work) / me), seed=seed, batch_size=setup.batch_size,
                buffer="reservoir", buffer_size=n, watermark=n, max_steps=steps,
                pseudo_epochs=10**6, report_to="none", disable_progress_bar=True,
                save_at_end=False, logging_steps=10**9,
                simulation_loss_steps=PERIOD if me == "on" else 0,
            )  # fmt: skip
            trainer = OnlineTrainer(
                model, args, torch.optim.Adam(model.parameters(), lr=1e-3),
                train_source=iter(data), hooks=[turns, *([Feed()] if me == "on" else [])],
                process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
            )  # fmt: skip
            sides[me] = (trainer, turns, model)
        errors: list[BaseException] = []

        def run(me: str) -> None:
            try:
                sides[me][0].train()
            except BaseException as exc:  # reported below, after both threads ended
                errors.append(exc)
            finally:
                baton.give(me, finished=True)

        threads = [threading.Thread(target=run, args=(me,)) for me in ("on", "off")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    same = all(
        torch.equal(a, b)
        for a, b in zip(sides["on"][2].parameters(), sides["off"][2].parameters(), strict=True)
    )
    if not same:
        raise SystemExit("the tracked trainer's weights differ from the untracked one's")
    import melissa_trainer

    return {"on": sides["on"][1].periods, "off": sides["off"][1].periods,
            "module": melissa_trainer.__file__}  # fmt: skip


def summary(periods: dict[str, list[int]]) -> dict[str, float]:
    """The extra CPU per step (the median of the periods' (on - off) / PERIOD, us) and
    the off / on ratio of the periods' medians, the first tenth left out."""
    skip = len(periods["on"]) // 10
    on, off = periods["on"][skip:], periods["off"][skip:]
    extra = [(a - b) / PERIOD / 1e3 for a, b in zip(on, off, strict=False)]
    return {"extra": statistics.median(extra),
            "rate": statistics.median(off) / statistics.median(on),
            "step": statistics.median(off) / PERIOD / 1e3}  # fmt: skip


def child(package_parent: Path | None, steps: int, seed: int) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if package_parent is not None:  # the baseline's package before this checkout's
        env["PYTHONPATH"] = os.pathsep.join([str(package_parent), env.get("PYTHONPATH", "")])
    spec = json.dumps({"steps": steps, "seed": seed})
    out = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True,
                         text=True, env=env, check=False, cwd=ROOT)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"a duel failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--baseline", type=Path, default=None,
                   help="the folder holding the baseline's melissa_trainer (default: this "
                        "checkout's own)")  # fmt: skip
    p.add_argument("--rounds", type=int, default=6, help="rounds of both codes (default 6)")
    p.add_argument("--steps", type=int, default=2000, help="steps of each trainer a duel")
    p.add_argument("--quick", action="store_true", help="tiny: checks the pipeline, no figure")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        logging.disable(logging.WARNING)  # (the trainers' end-of-stream lines)
        from melissa_trainer.common.json_output import to_json

        spec = json.loads(opts.child)
        print(to_json(duel(spec["steps"], spec["seed"])))
        return
    rounds, steps = (1, 4 * PERIOD) if opts.quick else (opts.rounds, opts.steps)
    baseline = opts.baseline.resolve() if opts.baseline else None
    print(f"{rounds} round(s) of one duel of {steps} steps per code, alternate orders; "
          f"baseline {baseline or 'this checkout'} (the machine may be busy: both codes "
          "alike)")  # fmt: skip
    got: dict[str, list[dict[str, float]]] = {"ours": [], "baseline": []}
    for r in range(rounds):
        order = ["ours", "baseline"] if r % 2 == 0 else ["baseline", "ours"]
        for code in order:
            duel_ = child(None if code == "ours" else baseline, steps, seed=r)
            got[code].append(summary(duel_))
            print(f"round {r} {code:8s}: extra {got[code][-1]['extra']:6.1f} us a step "
                  f"(off's step {got[code][-1]['step']:7.1f} us), on / off rate "
                  f"{got[code][-1]['rate']:.4f} ({duel_['module']})", flush=True)  # fmt: skip
    ours = {k: statistics.median(x[k] for x in got["ours"]) for k in ("extra", "rate")}
    base = {k: statistics.median(x[k] for x in got["baseline"]) for k in ("extra", "rate")}
    rows = [
        {"case": f"tracked step's extra CPU on the training thread, on - off (median of "
                 f"{rounds} duels)",
         "ours": round(ours["extra"], 2), "baseline": round(base["extra"], 2),
         "unit": "us/step",
         "ratio": round(base["extra"] / ours["extra"], 3) if ours["extra"] > 0 else None,
         "target": TARGET},
        {"case": f"training thread's step rate, on / off in one duel (median of {rounds})",
         "ours": round(ours["rate"], 4), "baseline": round(base["rate"], 4), "unit": "ratio",
         "ratio": round(ours["rate"] / base["rate"], 4), "target": None},
    ]  # fmt: skip
    sys.path.insert(0, str(HERE))
    from report import print_rows

    print_rows(rows, "the tracked step's extra CPU", width=70)
    if opts.json:
        from melissa_trainer.common.json_output import to_json

        print(to_json({"rows": rows}))


if __name__ == "__main__":
    main()
