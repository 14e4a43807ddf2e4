"""`ingest.py`'s training rows: the `trainer_overhead` workload trained on what one
client process streams at a fixed rate into a `StreamSource` of this process, against
the same workload on a pre-filled source (no ingest); and the parts the pinned rows and
`ingest_split.py` / `ingest_threads.py` share: the streaming client (`stream_client`),
its fields (`distinct_fields`), the timed training run (`run_training`, `StepClock`)."""

from __future__ import annotations

import contextlib
import gc
import inspect
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import trainer_overhead as overhead
from ingest_arms import KB, MB, _hwm

from melissa_trainer import Hook, OnlineTrainer, StreamSource, TrainingArguments
from melissa_trainer.stream.heap import keep_freed_memory, recycle_frames
from melissa_trainer.stream.receiver_config import ReceiverConfig

TRAIN_TARGET = 0.85

STREAM_CLIENT = r"""
import os, sys, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning, fetch_endpoints
_DISTINCT_FIELDS
where, (nbytes, count, core), rate = sys.argv[1], map(int, sys.argv[2:5]), float(sys.argv[5])
if core >= 0:  # this process and its threads (ZeroMQ's too) on that core only
    os.sched_setaffinity(0, {core})
fields = distinct_fields(nbytes, count)  # the pre-filled run's samples, cycled
endpoints = [where] if where.startswith("tcp://") else fetch_endpoints(where, 60)
c = Client({"u": ((nbytes // 4,), "float32")}, None, 1, endpoints,
           tuning=ClientTuning(sndhwm=_HWM))
start, t = time.perf_counter(), 0
while True:  # paced, until killed
    due = int((time.perf_counter() - start) * rate) + 1
    while t < due:
        c.send(t, u=fields[t % count])
        t += 1
    time.sleep(0.0005)
"""


def distinct_fields(nbytes: int, count: int) -> list[np.ndarray]:
    """`count` distinct random float32 fields of `nbytes`: the data of both training
    runs (the same values, so that both train alike: one field sent again and again
    would drive Adam's second moments into float32 subnormals, which are slow)."""
    rng = np.random.default_rng(nbytes)
    return [rng.standard_normal(nbytes // 4).astype(np.float32) for _ in range(count)]


class StepClock(Hook):
    """Times the steps after the first `warmup` (start-up and the first fill excluded),
    in wall time and in this process's CPU time (all its threads), and counts the
    samples the source put into the buffer meanwhile."""

    def __init__(self, warmup: int, source: Any) -> None:
        self.warmup, self.source = warmup, source
        self.start, self.steps, self.seconds, self.received = 0.0, 0, 0.0, 0.0
        self.cpu_start, self.cpu_seconds = 0.0, 0.0

    def _put(self) -> float:
        telemetry = getattr(self.source, "telemetry", None)
        return float(telemetry().get("samples_put", 0.0)) if telemetry is not None else 0.0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == self.warmup:
            self.start, self.received = time.perf_counter(), -self._put()
            self.cpu_start = time.process_time()

    def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.steps = state.global_step - self.warmup
        self.seconds = time.perf_counter() - self.start
        self.cpu_seconds = time.process_time() - self.cpu_start
        self.received += self._put()


def streamed_sample(s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """A streamed field as the `trainer_overhead` workload's (3 inputs, 1024 targets)."""
    u = torch.from_numpy(s["u"])
    return u[:3], u[:1024] if u.numel() >= 1024 else u.repeat(1024 // u.numel())


def run_training(
    source: Any, steps: int, out: str, seed: int, process: Any, capacity: int
) -> StepClock:
    """The `trainer_overhead` workload (model, batch, Adam, a reservoir of `capacity`)
    fed by `source`, timed over `steps` steps after a warm-up of 50."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=out,
        batch_size=overhead.BATCH,
        buffer="reservoir",
        sample_to_insert_ratio=0,  # no rate limit: what this measured before issue 30's defaults
        buffer_size=capacity,
        watermark=overhead.BATCH,
        max_steps=steps + 50,
        save_at_end=False,
        seed=seed,
        disable_progress_bar=True,
        logging_steps=10_000,
    )
    model = overhead.make_model(seed)
    clock = StepClock(50, source)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-4),
        train_source=source,
        process_sample=process,
        hooks=[clock],
    )
    # every arm starts from a collected heap: the set-up garbage of the runs before
    # otherwise leaves a full collection due (150-190 ms over ~320k objects), which
    # lands in whichever timed window allocates fastest (a streamed one: issue 42's
    # pinned row, docs/measured.md "Fifth round")
    gc.collect()
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    if clock.steps != steps:
        raise RuntimeError(f"the run stopped after {clock.steps} of {steps} timed steps")
    return clock


def stream_client(
    where: str, nbytes: int, rate: float, count: int, core: int | None = None
) -> subprocess.Popen[bytes]:
    """A client process streaming `count` distinct fields of `nbytes` at `rate` msgs/s,
    until killed, to a rendezvous directory or a ``tcp://`` endpoint; pinned to `core`
    (with its threads) if given."""
    code = STREAM_CLIENT.replace("_HWM", str(_hwm(nbytes)))
    code = code.replace("_DISTINCT_FIELDS", inspect.getsource(distinct_fields))
    args = [where, str(nbytes), str(count), str(-1 if core is None else core), str(rate)]
    return subprocess.Popen([sys.executable, "-c", code, *args])


def run_streamed(
    nbytes: int,
    rate: float,
    steps: int,
    out: str,
    seed: int,
    capacity: int,
    keep: bool,
    client_core: int | None = None,
) -> tuple[float, float, float]:
    """The workload trained on what one client streams at `rate` msgs/s of `nbytes`
    (received in this process; the client pinned to `client_core` if given); returns
    (steps/s, samples/s received, steps per CPU second of this process)."""
    rendezvous = Path(out) / f"rendezvous-{seed}-{nbytes}"
    shutil.rmtree(rendezvous, ignore_errors=True)
    proc = stream_client(str(rendezvous), nbytes, rate, capacity, client_core)
    source = StreamSource(
        ReceiverConfig(rendezvous_dir=rendezvous, rcvhwm=_hwm(nbytes)), keep_freed_memory=keep
    )

    def end_stream_if_client_dies() -> None:  # the client runs until killed
        proc.wait()
        source.finish(wait=False)

    threading.Thread(target=end_stream_if_client_dies, daemon=True).start()
    try:
        clock = run_training(source, steps, out, seed, streamed_sample, capacity)
        if proc.poll() is not None:
            raise RuntimeError(f"the streaming client exited early ({proc.returncode})")
    finally:
        proc.kill()
        proc.wait()
    return (
        clock.steps / clock.seconds,
        clock.received / clock.seconds,
        clock.steps / clock.cpu_seconds,
    )


def training_rows(rounds: int, quick: bool, keep: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The workload trained on a stream, against the same workload (same sample size,
    same `streamed_sample`) on a pre-filled source: the difference is the ingest."""
    steps = 200 if quick else 800
    if keep:  # process-wide (melissa_trainer.stream.heap): before both kinds of run
        keep_freed_memory()
    out = tempfile.mkdtemp(prefix="mt-ingest-")
    rows, notes = [], []
    try:
        for nbytes, rate, label, capacity in (
            (KB, 20_000.0, "1 KB at 20k msgs/s", overhead.N_SAMPLES),
            (MB, 200.0, "1 MB at 200 MB/s", 512),  # 512 MB of samples at most
        ):
            # distinct samples, as many as the reservoir holds: the same memory traffic
            samples = [{"u": u} for u in distinct_fields(nbytes, capacity)]
            # the thresholds the streamed run's receiver sets (process-wide: its
            # `ReceiverConfig.recycle_frames`, at the first HELLO), before both kinds of
            # run, not from the first streamed run on
            recycle_frames(nbytes, (capacity + _hwm(nbytes) + 2) * nbytes)
            run_training(overhead.Prefilled(samples), 50, out, 0, streamed_sample, capacity)
            plain, streamed, received = [], [], []
            for r in range(rounds):
                source = overhead.Prefilled(samples)
                clock = run_training(source, steps, out, r, streamed_sample, capacity)
                plain.append(clock.steps / clock.seconds)
                speed, got, _ = run_streamed(nbytes, rate, steps, out, r, capacity, keep)
                streamed.append(speed)
                received.append(got)
            a, b = statistics.median(streamed), statistics.median(plain)
            rows.append(
                {
                    "case": f"training on a {label} stream",
                    "ours": round(a, 1),
                    "baseline": round(b, 1),
                    "unit": "steps/s",
                    "ratio": round(a / b, 3),
                    "target": TRAIN_TARGET,
                }
            )
            draws = a * overhead.BATCH
            notes.append(
                f"{label}: {statistics.median(received):,.0f} samples/s went into the "
                f"buffer during the timed steps (the client's pace: {rate:,.0f}/s; the "
                f"trainer drew {draws:,.0f} samples/s, and a reservoir evicts only drawn "
                f"samples: a faster client is held back, never dropped)"
            )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return rows, notes
