"""The timed operations of benchmarks/buffers.py: ours (a buffer's single-sample puts,
`get_batch` then `stack_samples`: `ours_put_rate`, `OursDraw`), TorchRL's
(`torchrl_classes`, `torchrl_put_rate`, `TorchRLDraw`) and the memcpy ceiling
(`memcpy_seconds`). Each returns seconds or a rate; the driver alternates them."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from melissa_trainer.buffers import Buffer, BufferConfig, Sample, make_buffer

#: the draws' batch size
BATCH = 64


def stack_samples(
    samples: Sequence[Sample], out: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """Gather samples into one contiguous array per field (the raw batch).

    With `out` (field -> array with a leading dimension >= len(samples)), the batch is
    written into `out[field][:len(samples)]` and those views are returned: no
    allocation, so large batches do not pay the page faults of fresh memory on every
    draw (for 64 x 1 MB fields that is most of the cost). The caller owns `out` and
    must not reuse it while a previous batch written there is still in use.
    """
    n = len(samples)
    if out is None:
        return {k: np.stack([s[k] for s in samples]) for k in samples[0]}
    return {k: np.stack([s[k] for s in samples], out=o[:n]) for k, o in out.items()}


def torchrl_classes() -> Any:
    """The TorchRL classes, or None when TorchRL cannot be imported."""
    try:
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        from torchrl.data import LazyTensorStorage, ReplayBuffer
        from torchrl.data.replay_buffers.samplers import RandomSampler

        logging.getLogger("torchrl").setLevel(logging.WARNING)
    except Exception as exc:  # noqa: BLE001 - any import failure means "skip the baseline"
        return exc
    return ReplayBuffer, LazyTensorStorage, RandomSampler


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---------------------------------------------------------------------- puts
def ours_put_rate(kind: str, n_elem: int, n: int) -> float:
    buf = make_buffer(BufferConfig(kind, n))
    sample = {"x": np.ones(n_elem, dtype=np.float32)}
    put = buf.put

    def run() -> None:
        for _ in range(n):
            put(sample)

    return n / _timed(run)


def torchrl_put_rate(trl: Any, n_elem: int, n: int) -> float:
    replay_buffer, storage, sampler = trl
    rb = replay_buffer(storage=storage(n + 1), sampler=sampler())
    x = torch.ones(n_elem)
    rb.add(x)  # lazy storage allocation, untimed
    add = rb.add

    def run() -> None:
        for _ in range(n):
            add(x)

    return n / _timed(run)


# ---------------------------------------------------------------------- draws
def distinct_samples(n_elem: int, count: int) -> list[dict[str, np.ndarray]]:
    return [{"x": np.full(n_elem, i, dtype=np.float32)} for i in range(count)]


class OursDraw:
    """get_batch(64) + np.stack, on a buffer holding ``capacity`` distinct samples."""

    def __init__(self, kind: str, samples: list[dict[str, np.ndarray]], reuse_out: bool) -> None:
        self.buf: Buffer = make_buffer(BufferConfig(kind, len(samples)))
        for s in samples:
            self.buf.put(s)
        self.refill = kind != "reservoir"
        self.out = (
            {k: np.empty((BATCH, *v.shape), v.dtype) for k, v in samples[0].items()}
            if reuse_out
            else None
        )

    def seconds(self, batches: int) -> float:
        total = 0.0
        for _ in range(batches):
            t0 = time.perf_counter()
            batch = self.buf.get_batch(BATCH)
            stacked = stack_samples(batch, self.out)
            total += time.perf_counter() - t0
            assert stacked["x"].shape[0] == BATCH
            del stacked
            if self.refill:
                for s in batch:
                    self.buf.put(s)
        return total


class TorchRLDraw:
    def __init__(self, trl: Any, samples: list[dict[str, np.ndarray]]) -> None:
        replay_buffer, storage, sampler = trl
        self.rb = replay_buffer(storage=storage(len(samples)), sampler=sampler())
        self.rb.extend(torch.from_numpy(np.stack([s["x"] for s in samples])))

    def seconds(self, batches: int) -> float:
        total = 0.0
        for _ in range(batches):
            t0 = time.perf_counter()
            out = self.rb.sample(BATCH)
            total += time.perf_counter() - t0
            assert out.shape[0] == BATCH
            del out
        return total


def memcpy_seconds(src: np.ndarray, dst: np.ndarray | None, repeats: int) -> float:
    """``repeats`` copies of ``src`` into ``dst``, or into a new array when ``dst`` is None."""
    t0 = time.perf_counter()
    for _ in range(repeats):
        np.copyto(np.empty_like(src) if dst is None else dst, src)
    return time.perf_counter() - t0
