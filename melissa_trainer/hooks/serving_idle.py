"""`IdleServing`: the thread of a `ServingHook` (`serving`) that serves the queue while
training waits.

Contract: while no training step has run for longer than `serving_budget.IDLE_STEPS`
typical steps (the median of the recent steps' own durations, STEP_START to STEP_END;
at least `serving_budget.IDLE_MIN` seconds: `ServingBudget.idle_after`) after the last
one ended, training is waiting (for data, for the other ranks, on a checkpoint), and
this thread serves the queue in that idle time, one batch at a time, free of the budget:
a simulation that waits for its prediction before sending the data training waits for
is answered, not timed out. The model is held by one side at a time: the thread takes
the hook's model lock for one batch (a step or a validation holds it otherwise), and
serves only if no step ended since it looked. `start` once training starts (again after
a `stop`); `stop` returns once the thread has ended (its batch, if one runs, done).
Standard library only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.stream.serving import PredictServer

__all__ = ["IdleServing"]


class IdleServing:
    """The idle thread (module docstring).

    Args: `model`, the lock that holds the model (reentrant: the training thread's over a
        step or a validation); `idle_after`, the seconds after a step's end that make
        training idle (`ServingBudget.idle_after`, asked each time); `last_end`, when
        the last step ended (``time.perf_counter()``; None: none yet); `tick`, called at
        each turn (a summary due while training waits is not held back).
    """

    def __init__(
        self,
        model: threading.RLock,
        idle_after: Callable[[], float],
        last_end: Callable[[], float | None],
        tick: Callable[[], None],
    ) -> None:
        self._model, self._idle_after, self._last_end, self._tick = (
            model, idle_after, last_end, tick,
        )  # fmt: skip
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, server: PredictServer, serve: Callable[[], None]) -> None:
        """Start the thread, unless it runs: it waits for `server`'s requests and, idle,
        calls `serve` (one batch of them)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, args=(server, serve), name="melissa-serving-idle", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """End the thread and wait for it. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self, server: PredictServer, serve: Callable[[], None]) -> None:
        while not self._stop.is_set():
            self._tick()
            if not server.wait_pending(0.1):
                continue
            last = self._last_end()
            wait = self._idle_after()
            if last is None or time.perf_counter() - last < wait:
                self._stop.wait(wait / 4)
                continue
            if not self._model.acquire(timeout=0.1):
                continue  # a step or a validation runs
            try:
                if self._last_end() == last:  # (no step ran in between)
                    serve()
            finally:
                self._model.release()
