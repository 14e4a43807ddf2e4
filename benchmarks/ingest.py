"""Ingest throughput: Client processes -> Receiver -> sample -> buffer, against raw pyzmq.

Ours: `melissa_trainer.client.Client` processes (1 or 4) send one float32 field per
time step into a `Receiver`, whose samples go into a FIFO buffer that a consumer thread
drains in batches (fields of up to 64 KB, which clients batch and the FIFO holds as
blocks, with `get_block`, as the stream dataset takes its default batches; larger ones
with `get_batch`, without a copy).
Baseline: plain pyzmq PUSH processes sending the same message sizes (one frame
of header + payload bytes; ``copy=False`` above 64 KB) to a PULL socket that receives
and discards (``recv()``, or ``recv(copy=False)`` for large messages), in a process of
its own (ours, run before in this one, sets malloc's thresholds process-wide: see
`ReceiverConfig.recycle_frames`; the raw program must not inherit them). The clock runs
from the go signal to the last message in (ours: the end of stream). A and B alternate
(A B A B ...) and medians are compared; ratio = ours / baseline (higher is better).
Above 64 KB, where arrays leave without a copy, ours runs once per round in each
``Client(array_reuse=...)`` mode: "immediate" (the default: each `send` returns once
ZeroMQ has released the array, which the raw sender never waits for), "next_send"
(released at the next `send`) and "never" (the array is handed over, as the raw
sender's immutable bytes are: the like-for-like contract). Beside each throughput row, the
CPU per message of the threads that receive it, and the minor page faults per message of
the receiving process (ZeroMQ's I/O thread faulting in the pages of each new frame, which
the CPU row leaves out: the cause of issue 42's 0.49 one day and 0.69 the next); and,
above 64 KB, ours against the raw receiver given the malloc thresholds ours sets for its
frames (`ReceiverConfig.recycle_frames`): the like-for-like figure, as raw with glibc's
defaults faults in most pages of its frames again too.

Training under ingest: the `benchmarks/trainer_overhead.py` workload (model, batch,
reservoir, Adam) trained on what one client process streams at a fixed rate (20k
msgs/s of 1 KB, or 200 MB/s of 1 MB fields) into a `StreamSource` of the training
process (each field read as the workload's 3 inputs and 1024 targets), against the
same workload on a pre-filled in-process source, without ingest (both with glibc's
malloc as it is, or both after `keep_freed_memory()` with ``--keep-freed-memory``, the
streamed runs' StreamSource then setting it too). Steps/s after a 50-step warm-up.
The reservoir evicts only samples already drawn (no sample is lost), so the stream can
enter no faster than the trainer draws (steps/s x 64): where that is below the
client's pace, the client is held back by back-pressure, and the notes under the table
give the rate that did enter.

Pinned (Linux, 2 cores or more): the same workload with this process (all its threads:
the receiver's and ZeroMQ's too) on one core and the client streaming 1 KB fields at
20k msgs/s on another, against the same workload alone on its core (pre-filled);
target: ours >= 0.93x (step time alone / step time with the stream). Two more rows
tell our cost from the machine's, against the same baseline: the same client streaming
into a raw pyzmq PULL thread of the training process (receiving, none of our ingest),
and into a process on the client's core that the trainer never hears of (memory
bandwidth and shared caches only). The raw receivers take the client's full pace; ours
holds it at the trainer's draws. A fourth row, a fairer baseline than the raw PULL
thread for ours: a raw thread of the training process that decodes each BATCH and puts
its samples into the same (columnar) reservoir, blocking for room
(`ingest_raw_put.RawPutSource`: none of our dedup, ledger or checkpoint record).

    python benchmarks/ingest.py            # a few minutes
    python benchmarks/ingest.py --quick    # shorter
    python benchmarks/ingest.py --json     # {"rows": [...]}
    python benchmarks/ingest.py --keep-freed-memory   # malloc keeps freed frames
    python benchmarks/ingest.py --only-pinned          # the pinned rows only
    python benchmarks/ingest.py --sizes 1MB --clients 1 --no-training --no-pinned

The code, one module a part: `ingest_arms` (ours and the raw receiver, their senders),
`ingest_throughput` (the throughput rows), `ingest_training` (the training rows, and the
streaming client and timed run the pinned rows share), `ingest_pinned` (the pinned
rows); this one, the command line, re-exports their names (`__all__`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from melissa_trainer.stream.heap import recycle_frames

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reader  # noqa: E402
from ingest_arms import (  # noqa: E402
    CLIENT_CODE,
    FAULTS,
    INLINE_MAX,
    KB,
    MB,
    RAW_CODE,
    _go,
    _hwm,
    _spawn,
    _wire_bytes,
    run_ours,
    run_raw,
    run_raw_here,
    thread_cpu,
)
from ingest_pinned import PINNED_TARGET, RawPullThread, pin_process, pinned_rows  # noqa: E402
from ingest_throughput import SIZES, TARGETS, faults_row, ingest_rows  # noqa: E402
from ingest_training import (  # noqa: E402
    TRAIN_TARGET,
    StepClock,
    distinct_fields,
    run_streamed,
    run_training,
    stream_client,
    streamed_sample,
    training_rows,
)
from report import add_flags, finish  # noqa: E402

#: the names the other ingest benchmarks (``import ingest as bench``), the tests and the
#: raw receiver's process (`ingest_arms.RAW_RUN`: reader, recycle_frames, _hwm,
#: run_raw_here, FAULTS) take from here, as before the split into ingest_*.py
__all__ = [
    "CLIENT_CODE", "FAULTS", "INLINE_MAX", "KB", "MB", "PINNED_TARGET", "RAW_CODE", "SIZES",
    "TARGETS", "TRAIN_TARGET", "RawPullThread", "StepClock", "_go", "_hwm", "_spawn",
    "_wire_bytes", "distinct_fields", "faults_row", "ingest_rows", "main", "pin_process",
    "pinned_rows", "reader", "recycle_frames", "run_ours", "run_raw", "run_raw_here",
    "run_streamed", "run_training", "stream_client", "streamed_sample", "thread_cpu",
    "training_rows",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--no-training", action="store_true", help="skip training rows")
    parser.add_argument("--no-ingest", action="store_true", help="only the training rows")
    parser.add_argument("--no-pinned", action="store_true", help="skip the pinned rows")
    parser.add_argument("--sizes", help="throughput rows of these sizes only, e.g. 1KB,1MB")
    parser.add_argument("--clients", help="throughput rows with these client counts, e.g. 1")
    parser.add_argument("--only-pinned", action="store_true", help="only the pinned rows")
    parser.add_argument(
        "--reuse", help="throughput rows above 64 KB in these array_reuse modes, e.g. immediate"
    )
    parser.add_argument(
        "--nonfinite",
        choices=["refuse", "accept"],
        default="refuse",
        help="the receiver's policy in the throughput rows (refuse, the default, checks "
        "every sample for NaN and Inf; accept does not)",
    )
    parser.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="glibc malloc keeps freed memory (StreamSource(keep_freed_memory=True))",
    )
    opts = parser.parse_args()
    rounds = opts.rounds or (3 if opts.quick else 7)  # 7: a median that holds on a noisy day
    torch.set_num_threads(1)
    only = opts.only_pinned
    sizes = opts.sizes.split(",") if opts.sizes else None
    clients = tuple(int(c) for c in opts.clients.split(",")) if opts.clients else (1, 4)
    reuse = opts.reuse.split(",") if opts.reuse else None
    rows = (
        []
        if opts.no_ingest or only
        else ingest_rows(rounds, opts.quick, sizes, clients, reuse, opts.nonfinite)
    )
    notes: list[str] = []
    if not (opts.no_training or only):
        train, notes = training_rows(rounds, opts.quick, opts.keep_freed_memory)
        rows += train
    if not opts.no_pinned and hasattr(os, "sched_setaffinity"):
        pinned, more = pinned_rows(rounds, opts.quick)
        rows += pinned
        notes += more
    title = f"medians of {rounds} interleaved rounds; ratio = ours / baseline"
    finish(rows, title, 64, as_json=opts.json, notes=notes)


if __name__ == "__main__":
    main()
