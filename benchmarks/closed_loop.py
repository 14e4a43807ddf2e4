"""The surrogate served while it trains (issue 47): what serving costs training, and how
long a request waits.

Workload: an MLP 64 -> 512 -> 512 -> 64, batch 64, Adam, one torch thread, samples from
an in-process source (no stream: the step rate is the trainer's alone). Arm A trains
with a `ServingHook` (bound on loopback, published in a rendezvous directory) while a
client process asks `Predictor.predict` at `--rate` requests per second (each request
one 64-float input; timeout 2 s); arm B (the baseline) trains the same without the hook
and without requests. The arms alternate (A B A B ..., `--rounds` each) and the medians
of the step rates, measured from step 20 to the last, are compared; target: serving
keeps >= 0.95x the step rate.

Latency rows (from arm A's runs, all rounds pooled; each run's first answer left out: it
waited for the endpoint to be published and connected): the client's p50 and p99 in
milliseconds, against the median step time (ratio step / latency: 1 means answered
within one step's time), and the hook's p50 and p99 in steps (versions between a
request's arrival and its answer; ratio 1 / steps).

Where it pays (`examples/heat_guess`): a study of implicit heat solvers that ask the
trainer for each step's initial guess, arm A, against the same study whose solvers never
ask and solve from their previous state, arm B, alternated (A B, B A, ...,
`--study_rounds` each, the same parameters in both). The work is the products by the
operator A per time step (each iteration's, and the guess's check), over the second
half of the study (the simulations launched last); ratio B / A, target >= 1.3x less
work with the Jacobi solver (`--method jacobi`, the example's default). Both arms train
the same number of steps per sample (the reservoir's sample-to-insert ratio), and the
surrogates' final errors on held-out simulations are compared (ratio B / A: 1 means
equal). The same with conjugate gradient, informative (no target).

    python benchmarks/closed_loop.py                 # ~5 minutes
    python benchmarks/closed_loop.py --quick --json  # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from melissa_trainer import Hook, OnlineTrainer, ServingHook, TrainingArguments

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
from heat_guess.report_words import second_half, work_per_step  # noqa: E402
from heat_guess.solver import GuessConfig  # noqa: E402
from heat_guess.train import run_study  # noqa: E402
from report import add_flags, print_json, print_rows  # noqa: E402

WIDTH = 64
WARMUP = 20

REQUESTER = """
import json, sys, threading, time
import numpy as np
from melissa_trainer.client import Predictor, PredictionUnavailable

directory, rate = sys.argv[1], float(sys.argv[2])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
latencies, failures, warm = [], {}, False
u = np.ones(WIDTH, np.float32)
with Predictor(0, rendezvous_dir=directory) as p:
    next_at = time.perf_counter()
    while not done.is_set():
        started = time.perf_counter()
        try:
            p.predict({"u": u}, timeout=2.0)
            if warm:  # (the first answer waited for the endpoint and the connection)
                latencies.append((time.perf_counter() - started) * 1000)
            warm = True
        except PredictionUnavailable as exc:
            key = getattr(exc, "reason", type(exc).__name__)
            failures[key] = failures.get(key, 0) + 1
        next_at = max(next_at + 1 / rate, time.perf_counter())
        done.wait(max(0.0, next_at - time.perf_counter()))
print(json.dumps({"latencies_ms": latencies, "failures": failures}))
""".replace("WIDTH", str(WIDTH))


class Clock(Hook):
    """The time of step WARMUP and of the last step."""

    def __init__(self) -> None:
        self.start = self.end = 0.0
        self.steps = 0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == WARMUP:
            self.start = time.perf_counter()
        self.end, self.steps = time.perf_counter(), state.global_step


def samples(rank: int, world: int) -> Any:
    rng = np.random.default_rng(rank)
    while True:
        x = rng.standard_normal(WIDTH).astype(np.float32)
        yield {"u": x, "v": np.tanh(x)}


def run_arm(serving: bool, steps: int, rate: float, tmp: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
        torch.nn.ReLU(), torch.nn.Linear(512, WIDTH),
    )  # fmt: skip
    clock = Clock()
    hooks: list[Hook] = [clock]
    requester = None
    rendezvous = Path(tempfile.mkdtemp(dir=tmp))
    hook = None
    if serving:
        hook = ServingHook(
            {"u": ((WIDTH,), "float32")}, bind="tcp://127.0.0.1:*", rendezvous_dir=str(rendezvous)
        )
        hooks.append(hook)
        script = tmp / "requester.py"
        script.write_text(REQUESTER)
        requester = subprocess.Popen(
            [sys.executable, str(script), str(rendezvous), str(rate)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
    try:
        trainer = OnlineTrainer(
            model,
            TrainingArguments(
                output_dir=str(Path(tempfile.mkdtemp(dir=tmp))),
                batch_size=64,
                buffer="fifo",
                buffer_size=1024,
                max_steps=steps,
                logging_steps=10**9,
                save_at_end=False,
                disable_progress_bar=True,
                report_to="none",
            ),
            torch.optim.Adam(model.parameters(), lr=1e-3),
            train_source=samples,
            process_sample=lambda s: (torch.from_numpy(s["u"]), torch.from_numpy(s["v"])),
            hooks=hooks,
        )
        trainer.train()
        client: dict[str, Any] = {}
        if requester is not None:
            out, _ = requester.communicate("", timeout=60)
            client = json.loads(out)
    finally:
        if requester is not None and requester.poll() is None:
            requester.kill()
            requester.wait()
    rate_steps = (clock.steps - WARMUP) / (clock.end - clock.start)
    return {
        "steps_per_s": rate_steps,
        "client": client,
        "telemetry": hook.telemetry() if hook is not None else {},
    }


def study_rows(
    rounds: int, simulations: int, time_steps: int, tmp: Path
) -> tuple[list[dict[str, Any]], list[str]]:
    """The heat_guess study with and without the surrogate, alternated (module
    docstring): its rows, and lines for people (per simulation, per arm)."""
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    for method in ("jacobi", "cg"):
        config = GuessConfig(time_steps=time_steps, method=method)
        work: dict[bool, list[float]] = {True: [], False: []}
        error: dict[bool, list[float]] = {True: [], False: []}
        for i in range(rounds):
            for surrogate in (True, False) if i % 2 == 0 else (False, True):
                out = Path(tempfile.mkdtemp(dir=tmp))
                result = run_study(out, config, surrogate=surrogate, num_simulations=simulations)
                sims = result["simulations"]
                if len(sims) != simulations:
                    raise RuntimeError(f"{len(sims)} of {simulations} simulations recorded")
                work[surrogate].append(work_per_step(second_half(sims)))
                error[surrogate].append(result["final_error"])
                per_sim = [round(float(np.mean(s["products"])), 1) for s in sims]
                lines.append(
                    f"{method} round {i} {'surrogate' if surrogate else 'previous state'}: "
                    f"products/step per simulation {per_sim}, final error "
                    f"{result['final_error']:.3g}, {result['global_step']} steps"
                )
        ours, base = statistics.median(work[True]), statistics.median(work[False])
        e_ours, e_base = statistics.median(error[True]), statistics.median(error[False])
        target = 1.3 if method == "jacobi" else None
        rows.append(
            {"case": f"{method} solver work, 2nd half of the study, surrogate guess / "
             "previous state", "ours": ours, "baseline": base, "unit": "A products/step",
             "ratio": base / ours, "target": target}
        )  # fmt: skip
        rows.append(
            {"case": f"{method} study: surrogate's final error, closed loop / not",
             "ours": e_ours, "baseline": e_base, "unit": "relative L2",
             "ratio": e_base / e_ours, "target": None}
        )  # fmt: skip
    return rows, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer, shorter rounds")
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--steps", type=int, default=None, help="steps per run")
    parser.add_argument("--rounds", type=int, default=None, help="A B rounds")
    parser.add_argument(
        "--study_rounds", type=int, default=None, help="A B rounds of the heat_guess study"
    )
    opts = parser.parse_args()
    steps = opts.steps or (80 if opts.quick else 400)
    rounds = opts.rounds or (1 if opts.quick else 5)
    torch.set_num_threads(1)
    served, plain, latencies, step_lat, failures = [], [], [], [], {}
    shares: list[float] = []  # the hook's serving time / training time, per serving run
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for i in range(rounds):
            order = (True, False) if i % 2 == 0 else (False, True)
            for serving in order:
                result = run_arm(serving, steps, opts.rate, tmp)
                if serving:
                    served.append(result["steps_per_s"])
                    latencies += result["client"]["latencies_ms"]
                    for key, n in result["client"]["failures"].items():
                        failures[key] = failures.get(key, 0) + n
                    t = result["telemetry"]
                    shares.append(t.get("serving_share", 0.0))
                    step_lat.append(
                        (t.get("latency_steps_p50", 0.0), t.get("latency_steps_p99", 0.0))
                    )
                else:
                    plain.append(result["steps_per_s"])
    ours, base = statistics.median(served), statistics.median(plain)
    step_ms = 1000 / base
    p50, p99 = (float(v) for v in np.percentile(latencies, [50, 99]))
    s50 = statistics.median(s[0] for s in step_lat)
    s99 = statistics.median(s[1] for s in step_lat)
    rate = opts.rate
    rows = [
        {"case": f"steps/s serving {rate:g} req/s / not serving", "ours": ours,
         "baseline": base, "unit": "steps/s", "ratio": ours / base, "target": 0.95},
        {"case": "request latency p50 (client) vs one step", "ours": p50,
         "baseline": step_ms, "unit": "ms", "ratio": step_ms / p50, "target": None},
        {"case": "request latency p99 (client) vs one step", "ours": p99,
         "baseline": step_ms, "unit": "ms", "ratio": step_ms / p99, "target": None},
        {"case": "request latency p50 in steps vs one step", "ours": s50,
         "baseline": 1.0, "unit": "steps", "ratio": 1.0 / max(s50, 1e-9), "target": None},
        {"case": "request latency p99 in steps vs one step", "ours": s99,
         "baseline": 1.0, "unit": "steps", "ratio": 1.0 / max(s99, 1e-9), "target": None},
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmpdir:
        more, lines = study_rows(
            opts.study_rounds or (1 if opts.quick else 3),
            4 if opts.quick else 6,
            20 if opts.quick else 50,
            Path(tmpdir),
        )
    rows += more
    if opts.json:
        print_json(rows)
        return
    print("\n".join(lines))
    print_rows(rows, f"closed loop: {rounds} A/B rounds of {steps} steps, {len(latencies)} answers")
    print(f"answers {len(latencies)}, not answered {failures or 0}")
    print(f"serving share of training time (the hook's budget: 0.05): {shares}")
    print(
        f"step rates, serving: {[round(v, 1) for v in served]}; not: {[round(v, 1) for v in plain]}"
    )


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
