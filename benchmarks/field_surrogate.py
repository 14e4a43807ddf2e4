"""A field-sized surrogate on CPU: the Navier–Stokes example's FNO trained by OnlineTrainer
versus a hand-written torch loop of the same model on the same data.

Row "fno_trainer_vs_hand_loop": the example's FNO (`examples/navier_stokes/models.py`,
its default width 16, 12 modes, 4 Fourier layers) on GRID^2 fields (64 by default),
batch 16, Adam, one torch thread. The data: `N_SAMPLES` samples shaped like the
example's stream (omega(0) from the solver's random initial field, omega(t), parameters,
time step), precomputed here and put into the trainer's reservoir by an in-process
source; both sides map samples to batches with the example's `process_sample` and draw
`batch_size` random samples per step. OnlineTrainer runs with its default hooks. The
two alternate (A B A B ...), each round a fresh model of the same seed, and the medians
of the steps per second are compared; target: ours >= 0.97x the hand loop (a step here is
~0.2 s of compute, so the framework's per-step cost should vanish in it). Row
"fno_trainer_vs_hand_loop_cpu": the same runs in steps per CPU-second of the process
(all its threads): on a machine shared with other jobs, where the wall-clock row
measures mostly the load's changes between runs, the CPU time is the steadier figure.

Row "ingest_share_256": the same trainer and FNO on 256^2 fields (batch 4: a CPU step is
then ~0.6 s), its steps per second while a client process streams the example's two
256^2 fields (512 KB a message) over ZeroMQ on loopback at `--rate` messages per second
(25 by default: 12.5 MB/s) into its receiver, against the same trainer fed by an
in-process source of the same samples (the step alone); the first 3 steps of each run
are not timed (start-up, the first fill). Interleaved, medians; target: >= 0.93 (what
the receive path costs the step). The client and the trainer share the machine's cores,
as on a node. Row "ingest_share_256_cpu": the same runs in steps per CPU-second of the
trainer's process, its receiver thread included: what receiving costs in CPU.

Another grid than the default is in the row's name (`--quick`: "..._hand_loop_32",
"ingest_share_64"); `--json`'s "setup" says the sizes. Ratio: ours / baseline, higher is better.
    python benchmarks/field_surrogate.py            # 64^2 and 256^2, about 5 minutes
    python benchmarks/field_surrogate.py --quick    # 32^2 and 64^2, a few seconds a round
    python benchmarks/field_surrogate.py --json     # {"rows": [...], "setup": "..."}
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # report.py, trainer_overhead.py
from field_surrogate_problem import (  # noqa: E402
    LAYERS,
    MODES,
    WIDTH,
    example_mapping,
    make_samples,
    model,
)
from report import add_flags, finish  # noqa: E402
from trainer_overhead import Clock, Prefilled  # noqa: E402

from melissa_trainer import (  # noqa: E402
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    TrainingArguments,
)

TARGET = 0.97
INGEST_TARGET = 0.93
N_SAMPLES = 256
BATCH = 16
HAND_GRID, INGEST_GRID = 64, 256  # the rows' default grids (no grid in their names)


class CpuClock(Clock):
    """`Clock`, and the CPU time of this process (all its threads) over the same span."""

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        super().on_train_start(trainer, state, control)
        self.cpu_start = time.process_time()

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        super().on_loop_end(trainer, state, control)
        self.cpu_seconds = time.process_time() - self.cpu_start


def run_ours(
    samples: list, mapping: Any, steps: int, out: str, seed: int, modes: int
) -> tuple[float, float]:
    """OnlineTrainer over `steps` steps: (steps per second, steps per CPU-second)."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=out,
        batch_size=BATCH,
        buffer="reservoir",
        sample_to_insert_ratio=0,  # every sample is in the buffer: no rate limit
        buffer_size=len(samples),
        watermark=BATCH,
        max_steps=steps,
        save_at_end=False,
        seed=seed,
    )
    net = model(seed, modes)
    clock = CpuClock()
    trainer = OnlineTrainer(
        net,
        args,
        torch.optim.Adam(net.parameters(), lr=1e-3),
        train_source=Prefilled(samples),
        process_sample=mapping,
        hooks=[clock],
    )
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    return steps / clock.seconds, steps / clock.cpu_seconds


def run_hand(samples: list, mapping: Any, steps: int, seed: int, modes: int) -> tuple[float, float]:
    """The same model, data, mapping and batch size in a plain torch loop: (steps per
    second, steps per CPU-second)."""
    net = model(seed, modes)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = random.Random(seed)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        examples = [mapping(s) for s in rng.choices(samples, k=BATCH)]
        x = torch.stack([e[0] for e in examples])
        y = torch.stack([e[1] for e in examples])
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return steps / (time.perf_counter() - start), steps / (time.process_time() - cpu_start)


def measure(rounds: int, steps: int, grid: int) -> tuple[float, float, float, float]:
    """Medians over `rounds` interleaved rounds: (ours, hand loop) in steps/s, then in
    steps per CPU-second."""
    samples = make_samples(N_SAMPLES, grid)
    mapping = example_mapping()
    modes = min(MODES, grid // 2)
    out = tempfile.mkdtemp(prefix="mt-field-")
    ours, hand = [], []  # (steps/s, steps/CPU-s) of each round
    try:
        run_hand(samples, mapping, 3, 0, modes)  # warm-up
        for r in range(rounds):
            ours.append(run_ours(samples, mapping, steps, out, seed=r, modes=modes))
            hand.append(run_hand(samples, mapping, steps, seed=r, modes=modes))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return (
        statistics.median(o[0] for o in ours),
        statistics.median(h[0] for h in hand),
        statistics.median(o[1] for o in ours),
        statistics.median(h[1] for h in hand),
    )


#: examples/, where the client imports the example's solver from (`navier_stokes.solver`)
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: the ingest row's batch and untimed first steps
INGEST_BATCH, WARMUP = 4, 3
STREAM_CLIENT = r"""
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from navier_stokes.solver import initial_vorticity
from melissa_trainer.client import Client, fetch_endpoints
where, grid, rate = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
fields = [initial_vorticity(grid, s).astype(np.float32) for s in range(8)]
schema = {"vorticity": ((grid, grid), "float32"), "initial": ((grid, grid), "float32")}
parameters = {"nu": 0.02, "amplitude": 0.1, "wavenumber": 3.0}
# array_reuse never: the arrays are never modified, so no send waits for ZeroMQ
c = Client(schema, parameters, 1, fetch_endpoints(where, 60), array_reuse="never")
start, t = time.perf_counter(), 0
while True:  # paced, until killed
    due = int((time.perf_counter() - start) * rate) + 1
    while t < due:
        c.send(t, vorticity=fields[(t + 1) % 8], initial=fields[t % 8])
        t += 1
    time.sleep(0.001)
"""


class StepClock(Hook):
    """Wall time and this process's CPU time (all its threads) of the steps after the
    first `warmup` (start-up and the first fill excluded)."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.start, self.steps, self.seconds = warmup, 0.0, 0, 0.0
        self.cpu_start, self.cpu_seconds = 0.0, 0.0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == self.warmup:
            self.start, self.cpu_start = time.perf_counter(), time.process_time()

    def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.steps = state.global_step - self.warmup
        self.seconds = time.perf_counter() - self.start
        self.cpu_seconds = time.process_time() - self.cpu_start


def train_timed(
    source: Any, mapping: Any, steps: int, out: str, seed: int, modes: int
) -> tuple[float, float]:
    """The FNO trained by OnlineTrainer on what `source` puts in its reservoir, batch
    `INGEST_BATCH`, no progress bar; (steps per second, steps per CPU-second) over
    `steps` steps after `WARMUP`."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=out,
        batch_size=INGEST_BATCH,
        buffer="reservoir",
        sample_to_insert_ratio=0,  # training never waits for the stream
        buffer_size=64,
        watermark=INGEST_BATCH,
        max_steps=WARMUP + steps,
        save_at_end=False,
        seed=seed,
        disable_progress_bar=True,
        logging_steps=10_000,
    )
    net = model(seed, modes)
    clock = StepClock(WARMUP)
    trainer = OnlineTrainer(
        net,
        args,
        torch.optim.Adam(net.parameters(), lr=1e-3),
        train_source=source,
        process_sample=mapping,
        hooks=[clock],
    )
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    if clock.steps != steps:
        raise RuntimeError(f"the run stopped after {clock.steps} of {steps} timed steps")
    return clock.steps / clock.seconds, clock.steps / clock.cpu_seconds


def train_streamed(
    grid: int, rate: float, mapping: Any, steps: int, out: str, seed: int, modes: int
) -> tuple[float, float]:
    """`train_timed` on what a client process streams at `rate` messages/s of two
    `grid`^2 fields; the client is killed after."""
    rendezvous = Path(out) / f"rendezvous-{seed}"
    shutil.rmtree(rendezvous, ignore_errors=True)
    code_args = [str(EXAMPLES), str(rendezvous), str(grid), str(rate)]
    proc = subprocess.Popen([sys.executable, "-c", STREAM_CLIENT, *code_args])
    schema = {"vorticity": ((grid, grid), "float32"), "initial": ((grid, grid), "float32")}
    source = StreamSource(ReceiverConfig(rendezvous_dir=rendezvous, fields=schema))

    def end_stream_if_client_dies() -> None:  # it streams until killed: else it failed
        proc.wait()
        source.finish(wait=False)

    threading.Thread(target=end_stream_if_client_dies, daemon=True).start()
    try:
        rate_streamed = train_timed(source, mapping, steps, out, seed, modes)
        if proc.poll() is not None:
            raise RuntimeError(f"the streaming client exited early ({proc.returncode})")
    finally:
        proc.kill()
        proc.wait()
    return rate_streamed


def measure_ingest(
    rounds: int, steps: int, grid: int, rate: float
) -> tuple[float, float, float, float]:
    """Medians over `rounds` interleaved rounds: (streamed, alone) in steps/s, then in
    steps per CPU-second."""
    samples = make_samples(64, grid)
    mapping = example_mapping()
    modes = min(MODES, grid // 2)
    out = tempfile.mkdtemp(prefix="mt-field-ingest-")
    streamed, alone = [], []
    try:
        train_timed(Prefilled(samples), mapping, 2, out, 0, modes)  # warm-up
        for r in range(rounds):
            alone.append(train_timed(Prefilled(samples), mapping, steps, out, r, modes))
            streamed.append(train_streamed(grid, rate, mapping, steps, out, r, modes))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return (
        statistics.median(x[0] for x in streamed),
        statistics.median(x[0] for x in alone),
        statistics.median(x[1] for x in streamed),
        statistics.median(x[1] for x in alone),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_flags(parser, quick="32^2, fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--grid", type=int, default=None, help="grid side (default 64)")
    parser.add_argument(
        "--ingest_grid", type=int, default=None, help="the streamed fields' side (default 256)"
    )
    parser.add_argument(
        "--ingest_steps", type=int, default=None, help="timed steps of each ingest run"
    )
    parser.add_argument("--rate", type=float, default=25.0, help="messages/s the client sends")
    parser.add_argument(
        "--cases", default="hand,ingest", help="rows to run: hand, ingest (comma-separated)"
    )
    opts = parser.parse_args(argv)
    rounds = opts.rounds or (3 if opts.quick else 5)
    steps = opts.steps or (15 if opts.quick else 40)
    grid = opts.grid or (32 if opts.quick else HAND_GRID)
    ingest_grid = opts.ingest_grid or (64 if opts.quick else INGEST_GRID)
    ingest_steps = opts.ingest_steps or (10 if opts.quick else 20)
    cases = set(opts.cases.split(","))
    if not cases <= {"hand", "ingest"}:
        parser.error(f"--cases {opts.cases}: each case is hand or ingest")
    torch.set_num_threads(1)
    rows, titles = [], []
    if "hand" in cases:
        ours, hand, ours_cpu, hand_cpu = measure(rounds, steps, grid)
        # (the default's name as it always was: other runs compare it)
        name = "fno_trainer_vs_hand_loop" + ("" if grid == HAND_GRID else f"_{grid}")
        rows.append(row(name, ours, hand, TARGET))
        rows.append(row(f"{name}_cpu", ours_cpu, hand_cpu, TARGET, "steps/CPU-s"))
        titles.append(f"{name}: {grid}^2, batch {BATCH}, {rounds} rounds of {steps} steps")
    if "ingest" in cases:
        streamed, alone, streamed_cpu, alone_cpu = measure_ingest(
            rounds, ingest_steps, ingest_grid, opts.rate
        )
        name = f"ingest_share_{ingest_grid}"
        rows.append(row(name, streamed, alone, INGEST_TARGET))
        rows.append(row(f"{name}_cpu", streamed_cpu, alone_cpu, INGEST_TARGET, "steps/CPU-s"))
        titles.append(
            f"{name}: {ingest_grid}^2 fields at {opts.rate:g} msgs/s, batch "
            f"{INGEST_BATCH}, {rounds} rounds of {ingest_steps} steps"
        )
    title = (
        f"FNO width {WIDTH}, {LAYERS} layers, Adam, 1 thread, CPU; medians of interleaved "
        "rounds; " + "; ".join(titles) + "; ratio = ours / baseline (higher is better)"
    )
    finish(rows, title, 32, as_json=opts.json, setup=title)


def row(
    case: str, ours: float, base: float, target: float, unit: str = "steps/s"
) -> dict[str, Any]:
    return {
        "case": case,
        "ours": round(ours, 3),
        "baseline": round(base, 3),
        "unit": unit,
        "ratio": round(ours / base, 3),
        "target": target,
    }


if __name__ == "__main__":
    main()
