"""How a `ServingHook` (`serving`) serves one batch of queued requests
(`ServedBatches.serve`): the model run on their arrays (`inference.Inference`), each
request answered with its part of the outputs and the model's version, or every one of
them refused ``failed`` when the inference raised (the user's functions or model on
these inputs), the failure logged by a `LogSummary` (the first of each exception type
in full, then a summary at most every 30 s, as the server's rejected requests); and
what the telemetry reports of it: the batches run and the latencies of the most recent
answers (`latencies`: percentiles in steps and ms).

Batches are served one at a time (the hook's model lock: the training thread between
steps, or its idle thread); the failures' summary has a lock of its own, as the idle
thread also ticks it while training waits (`tick`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from melissa_trainer.common.words import plural
from melissa_trainer.hooks.inference import Inference
from melissa_trainer.stream.log_summary import FAILED, LogSummary
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_queue import Pending

__all__ = ["LATENCIES", "ServedBatches"]

#: latencies kept for the percentiles (the most recent)
LATENCIES = 10_000


class ServedBatches:
    """The batches a `ServingHook` served, and the failed inferences it logged.

    Args:
        inference: the model's inference path (the hook's `Inference`).
        logger: where failed inferences are logged (the hook module's logger).
        clock: the failures' summary's monotonic clock (tests inject one).

    Attributes:
        batches: model runs that served requests.
    """

    def __init__(
        self,
        inference: Inference,
        logger: logging.Logger,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inference, self._logger = inference, logger
        # (its calls serialised by `_lock`: the training and the idle thread serve)
        self._failures = LogSummary(logger, "serving", clock=clock)
        self._lock = threading.Lock()
        self.batches = 0
        #: told each successful inference's seconds (the slow-serving warning's figure)
        self.on_forward: Callable[[float], None] | None = None
        self._latency_steps: collections.deque[int] = collections.deque(maxlen=LATENCIES)
        self._latency_ms: collections.deque[float] = collections.deque(maxlen=LATENCIES)

    def name(self, who: str, clock: Callable[[], float]) -> None:
        """Log the failures from now on as `who`'s ("serving of rank R"), on `clock`."""
        with self._lock:
            self._failures = LogSummary(self._logger, who, clock=clock)

    def serve(
        self, server: PredictServer, trainer: Any, batch: list[Pending], version: int
    ) -> None:
        """Run `batch` through `trainer`'s model and answer each request of it at
        `version` on `server`; refuse them all ``failed`` if the inference raised."""
        if not batch:
            return
        self.batches += 1
        started = time.perf_counter()
        try:
            outputs = self._inference.run(trainer, [p.request.arrays for p in batch])
        except Exception as exc:  # the user's functions or model on these inputs
            detail = f"{type(exc).__name__}: {exc}"
            with self._lock:  # (`refused_failed` counts them all)
                self._failures.event(
                    FAILED,
                    type(exc).__name__,
                    None,
                    f"serving: the inference of {plural(len(batch), 'request')} failed: {detail}",
                    exc_info=True,
                )
            for pending in batch:
                server.refuse(pending, "failed", detail)
            return
        if self.on_forward is not None:
            self.on_forward(time.perf_counter() - started)
        now = time.monotonic()
        for pending, arrays in zip(batch, outputs, strict=True):
            server.answer(pending, arrays, version)
            self._latency_steps.append(version - pending.version)
            self._latency_ms.append((now - pending.received) * 1000)

    def tick(self) -> None:
        """Log the failures' summary if one is due."""
        with self._lock:
            self._failures.tick()

    def flush(self) -> None:
        """Log the failures not logged in full yet, counted (at the hook's close)."""
        with self._lock:
            self._failures.flush()

    def latencies(self) -> dict[str, float]:
        """The median and 99th percentile of the recent answers' latencies, in steps
        (``latency_steps_p50``, ``_p99``) and ms (``latency_ms_p50``, ``_p99``); none
        before an answer."""
        out: dict[str, float] = {}
        for name, values in (("steps", self._latency_steps), ("ms", self._latency_ms)):
            if values:
                p50, p99 = np.percentile(np.fromiter(values, float), [50, 99])
                out[f"latency_{name}_p50"], out[f"latency_{name}_p99"] = float(p50), float(p99)
        return out
