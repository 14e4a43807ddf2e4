"""Buffer throughput: single-sample puts and batch-of-64 draws, against TorchRL and memcpy.

Cases, for FIFO, FIRO and Reservoir buffers and float32 samples of 1 KB and 1 MB:

* put: single-sample ``put`` rate into a buffer with room (the receiver's hot path),
  beside TorchRL ``ReplayBuffer(storage=LazyTensorStorage(N), sampler=RandomSampler())``
  ``.add`` of a plain tensor (its fastest single-sample form). Our ``put`` stores a
  reference (the receiver hands over freshly received arrays); TorchRL copies the
  sample into its storage, which dominates at 1 MB. Target at 1 KB: >= 10x TorchRL.
* draw: ``get_batch(64)`` then ``np.stack`` of each field into one contiguous batch
  (what a training step needs), beside TorchRL ``sample(64)`` (a gather into a new
  tensor). FIFO/FIRO samples are put back after each timed draw, untimed.
* draw vs memcpy: the 1 MB draw bandwidth against ``np.copyto`` of a 64 MB array into
  an existing array (the ceiling). Target: >= 0.5x. Shown for stacking into a new
  array (which pays the kernel's page faults on the fresh 64 MB, like TorchRL's gather)
  and into a reused batch array (``np.stack(..., out=...)``, which, like ``np.copyto``,
  writes into memory already mapped). "vs alloc+memcpy" compares the former with
  ``np.copyto`` into a new array: the ceiling for any draw that returns fresh memory.

Ours and the baseline alternate (A B A B ..., >= 5 rounds) and medians are quoted.
Ratios are oriented so that higher is better. One torch thread.

    python benchmarks/buffers.py            # ~40 s
    python benchmarks/buffers.py --quick    # ~10 s, most of it importing torch and TorchRL
    python benchmarks/buffers.py --json     # {"rows": [...]}
    python benchmarks/buffers.py --malloc-reuse   # glibc keeps freed 64 MB batches for reuse

Fresh 64 MB arrays come from ``mmap`` (glibc's threshold is at most 32 MB), so every
new batch pays page faults. ``--malloc-reuse`` raises glibc's mmap and trim thresholds
(``mallopt``) for the whole run, as a training process may do: freed batches are then
reused without faults, for ours and for TorchRL alike.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from buffers_timed import (
    BATCH,
    OursDraw,
    TorchRLDraw,
    distinct_samples,
    memcpy_seconds,
    ours_put_rate,
    torchrl_classes,
    torchrl_put_rate,
)
from report import add_flags, print_json

KINDS = ("fifo", "firo", "reservoir")
SIZES = {"1KB": 256, "1MB": 256 * 1024}  # float32 elements
PUT_TARGET = 10.0
MEMCPY_TARGET = 0.5


@dataclass
class Config:
    rounds: int
    puts: dict[str, int]  # puts per round, by sample size
    draws: dict[str, int]  # timed batches per round, by sample size
    capacity: dict[str, int]  # distinct samples held for draws


FULL = Config(
    rounds=7,
    puts={"1KB": 4000, "1MB": 256},
    draws={"1KB": 300, "1MB": 12},
    capacity={"1KB": 4096, "1MB": 256},
)
QUICK = Config(
    rounds=5,
    puts={"1KB": 500, "1MB": 32},
    draws={"1KB": 30, "1MB": 2},
    capacity={"1KB": 512, "1MB": 64},
)


def _malloc_reuse() -> str:
    """Ask glibc to serve large allocations from the heap and keep freed memory."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 1 << 30) and libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError) as exc:
        return f"--malloc-reuse unavailable ({exc!r})"
    return "glibc mallopt: mmap/trim thresholds 1 GiB" if ok else "mallopt failed"


# ---------------------------------------------------------------------- driver
def row(case: str, ours: float, base: float | None, unit: str, target: float | None) -> dict:
    ratio = ours / base if base else None
    return {
        "case": case,
        "ours": ours,
        "baseline": base,
        "unit": unit,
        "ratio": ratio,
        "target": target,
    }


def run(cfg: Config, log: Callable[[str], None], notes: list[str]) -> list[dict]:
    torch.set_num_threads(1)
    trl = torchrl_classes()
    has_trl = not isinstance(trl, Exception)
    if not has_trl:
        notes.append(f"TorchRL is skipped: it cannot be imported ({trl!r})")
        log(notes[-1])
    med = statistics.median
    rows: list[dict] = []

    # puts: A B A B ... per (size, kind)
    for size, n_elem in SIZES.items():
        n = cfg.puts[size]
        for kind in KINDS:
            ours, base = [], []
            for _ in range(cfg.rounds):
                ours.append(ours_put_rate(kind, n_elem, n))
                if has_trl:
                    base.append(torchrl_put_rate(trl, n_elem, n))
            target = PUT_TARGET if size == "1KB" else None
            rows.append(
                row(
                    f"put {size} {kind} vs TorchRL",
                    med(ours),
                    med(base) if base else None,
                    "puts/s",
                    target,
                )
            )
            log(f"  measured put {size} {kind}")

    # draws
    for size, n_elem in SIZES.items():
        samples = distinct_samples(n_elem, cfg.capacity[size])
        batches = cfg.draws[size]
        batch_bytes = BATCH * n_elem * 4
        trl_draw = TorchRLDraw(trl, samples) if has_trl else None
        if size == "1MB":
            src = np.ones(BATCH * n_elem, dtype=np.float32)  # 64 MB
            dst = np.zeros_like(src)
        for kind in KINDS:
            fresh = OursDraw(kind, samples, reuse_out=False)
            reused = OursDraw(kind, samples, reuse_out=True) if size == "1MB" else None
            ours, ours_reused, base, mem, mem_fresh = [], [], [], [], []
            for _ in range(cfg.rounds):
                ours.append(batches * batch_bytes / fresh.seconds(batches))
                if trl_draw is not None:
                    base.append(batches * batch_bytes / trl_draw.seconds(batches))
                if reused is not None:
                    ours_reused.append(batches * batch_bytes / reused.seconds(batches))
                    mem.append(batches * batch_bytes / memcpy_seconds(src, dst, batches))
                    mem_fresh.append(batches * batch_bytes / memcpy_seconds(src, None, batches))
            gb = 1e9
            if size == "1KB":
                to_rate = batch_bytes  # bytes/s -> batches/s
                rows.append(
                    row(
                        f"draw 64x{size} {kind} vs TorchRL",
                        med(ours) / to_rate,
                        med(base) / to_rate if base else None,
                        "batches/s",
                        None,
                    )
                )
            else:
                rows.append(
                    row(
                        f"draw 64x{size} {kind} vs TorchRL",
                        med(ours) / gb,
                        med(base) / gb if base else None,
                        "GB/s",
                        None,
                    )
                )
                # The target row: stack_samples(out=...) writes the batch into memory
                # the caller reuses, as memcpy does into `dst`. Into a new array, both
                # ours and a plain copy pay the page faults of fresh 64 MB (rows below).
                rows.append(
                    row(
                        f"draw 64x{size} {kind} (reused out) vs memcpy",
                        med(ours_reused) / gb,
                        med(mem) / gb,
                        "GB/s",
                        MEMCPY_TARGET,
                    )
                )
                rows.append(
                    row(
                        f"draw 64x{size} {kind} (new array) vs memcpy",
                        med(ours) / gb,
                        med(mem) / gb,
                        "GB/s",
                        None,
                    )
                )
                rows.append(
                    row(
                        f"draw 64x{size} {kind} vs alloc+memcpy",
                        med(ours) / gb,
                        med(mem_fresh) / gb,
                        "GB/s",
                        None,
                    )
                )
            log(f"  measured draw {size} {kind}")
            del fresh, reused
        del samples, trl_draw
        gc.collect()
    return rows


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def print_table(rows: list[dict]) -> None:
    head = f"{'case':<42} {'ours':>12} {'baseline':>12} {'unit':>10} {'ratio':>8} {'target':>7}  ok"
    print(head)
    print("-" * len(head))
    for r in rows:
        ok = ""
        if r["target"] is not None and r["ratio"] is not None:
            ok = "yes" if r["ratio"] >= r["target"] else "NO"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        target = "-" if r["target"] is None else f">={r['target']:g}x"
        print(
            f"{r['case']:<42} {_fmt(r['ours']):>12} {_fmt(r['baseline']):>12} "
            f"{r['unit']:>10} {ratio:>8} {target:>7}  {ok}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_flags(parser, quick="a few-second run")
    parser.add_argument(
        "--malloc-reuse",
        action="store_true",
        help="raise glibc's mmap/trim thresholds (fresh batches without faults)",
    )
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    notes: list[str] = []
    if args.malloc_reuse:
        notes.append(_malloc_reuse())

    def log(msg: str) -> None:  # progress goes to stderr, results to stdout
        print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    rows = run(cfg, log, notes)
    if args.json:
        print_json(rows)
    else:
        print(
            f"\nbuffers benchmark ({'quick' if args.quick else 'full'}, {cfg.rounds} rounds, "
            f"medians, 1 torch thread, {time.perf_counter() - t0:.0f} s)\n"
        )
        print_table(rows)
        for note in notes:
            print(f"\nnote: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
