"""`SlowServing`: the WARNING a `ServingHook` logs when most of a window's prediction
requests reached their client too late to be used: answered past the client's timeout
(``answered_late``) or dropped unanswered in the queue past it (``expired``). Each is a
`PredictTimeout` on the simulation's side, which falls back; before this warning the
trainer said so only in its per-step figures and in an end-of-run line at INFO (a
user's trial, 2026-12-06: a 1 s forward, a 0.5 s timeout, 40 of 40 requests lost and
no warning).

The rule: at each check (every step end, and the idle thread's ticks), the outcomes
since the window began are counted: when at least `MIN_OUTCOMES` requests ended
(answered or expired) and more than half of them ended too late, one WARNING names the
counts, the measured forward time (median and max of the window's batches), the
trainer's typical step, the clients' timeout (as the requests carried it) and the
fixes. The window then starts again, and the next warning comes no sooner than
`WINDOW_S` later, only if most of that window's requests were late again: once, then
at most once per window while it persists, never one line per request. A window of
`WINDOW_S` without a warning starts again too (old outcomes do not count for ever).

Thread-safety: every method from any thread (one lock).
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections.abc import Callable, Mapping

from melissa_trainer.common.words import plural

__all__ = ["MIN_OUTCOMES", "WINDOW_S", "SlowServing"]

#: seconds: a window of outcomes, and the least time between two warnings
WINDOW_S = 60.0
#: the fewest outcomes (answered + expired) in a window that can make it warn
MIN_OUTCOMES = 4


class SlowServing:
    """Watches one rank's serving for late answers (module docstring).

    Args:
        logger: where the warning goes (the hook module's logger).
        who: the rank's name in the line ("serving of rank R").
        clock: monotonic seconds (tests inject one).
        typical_step: the trainer's typical step in seconds, None before one ran.
        settings: the hook's settings the fixes name (``max_batch``,
            ``max_latency_steps``, ``share``).
    """

    def __init__(
        self,
        logger: logging.Logger,
        who: str,
        clock: Callable[[], float],
        typical_step: Callable[[], float | None],
        settings: Mapping[str, object],
    ) -> None:
        self._logger, self.who, self.clock = logger, who, clock
        self._typical_step, self._settings = typical_step, settings
        self._lock = threading.Lock()
        self._since: float | None = None  # (the window's start, on `clock`)
        self._base: dict[str, float] = {}  # the counters at the window's start
        self._forwards: list[float] = []  # seconds, the window's batches
        self._timeouts_ms: list[int] = []  # the window's late requests' timeouts
        self._warned_at: float | None = None
        #: warnings logged
        self.warnings = 0

    def forward(self, seconds: float) -> None:
        """Count one batch's inference, of `seconds`."""
        with self._lock:
            if len(self._forwards) < 10_000:  # (bounded: a window of tiny batches)
                self._forwards.append(seconds)

    def check(self, counts: Mapping[str, float], late_timeouts_ms: list[int]) -> None:
        """Warn if the window's requests were mostly late (module docstring).

        Args:
            counts: the server's cumulative counters (``answered``, ``answered_late``,
                ``expired``).
            late_timeouts_ms: the timeouts of the requests late since the last check.
        """
        now = self.clock()
        with self._lock:
            self._timeouts_ms.extend(late_timeouts_ms[-1024:])
            if self._since is None:
                self._since = now
            d = {k: counts.get(k, 0) - self._base.get(k, 0) for k in _KEYS}
            ended = d["answered"] + d["expired"]
            late = d["answered_late"] + d["expired"]
            quiet = self._warned_at is None or now - self._warned_at >= WINDOW_S
            if ended >= MIN_OUTCOMES and 2 * late > ended and quiet:
                self._logger.warning("%s", self._words(d, ended))
                self.warnings += 1
                self._warned_at = now
                self._restart(now, counts)
            elif now - self._since >= WINDOW_S:
                self._restart(now, counts)

    def _restart(self, now: float, counts: Mapping[str, float]) -> None:
        self._since = now
        self._base = {k: counts.get(k, 0) for k in _KEYS}
        self._forwards, self._timeouts_ms = [], []

    def _words(self, d: Mapping[str, float], ended: float) -> str:
        """The warning: what happened, what was measured, the fixes."""
        late, expired = int(d["answered_late"]), int(d["expired"])
        lost = late + expired
        s = self._settings
        head = (
            f"{self.who}: {lost} of the last {plural(int(ended), 'request')} reached "
            f"their client too late to be used ({late} answered past the client's "
            f"timeout, {expired} expired unanswered in the queue): each is a "
            "PredictTimeout on the simulation's side, which fell back."
        )
        measured = []
        forward = None
        if self._forwards:
            forward = statistics.median(self._forwards)
            measured.append(
                f"the model's forward took {forward:.3g} s (median of "
                f"{plural(len(self._forwards), 'batch')}; max {max(self._forwards):.3g} s)"
            )
        step = self._typical_step()
        if step:
            measured.append(f"a training step {step:.3g} s")
        timeout = None
        if self._timeouts_ms:
            timeout = min(self._timeouts_ms) / 1000
            top = max(self._timeouts_ms) / 1000
            span = f"{timeout:.3g} s" if top == timeout else f"{timeout:.3g} to {top:.3g} s"
            measured.append(f"the clients' timeout {span}")
        fixes = []
        if forward is not None and timeout is not None and forward >= timeout:
            fixes.append(
                "a forward alone outlasts the timeout, so no batching helps: serve a "
                "smaller or faster model (on the GPU), or raise the clients' timeout"
            )
        else:
            fixes.append(
                f"let more requests share a forward (ServingHook(max_batch=...), now "
                f"{s['max_batch']}) and serve them sooner (ServingHook("
                f"max_latency_steps=0) answers at the next step's end, now "
                f"{s['max_latency_steps']}; share=..., now {s['share']}), serve a "
                "smaller or faster model, or raise the clients' timeout"
            )
        return (
            f"{head} Measured: {'; '.join(measured) or 'no batch ran'}. Fix: "
            f"{fixes[0]}: the `timeout` of Client.predict and Predictor.predict "
            "(default 10 s), mt_predict's timeout_s in C, ServingHook.predict's in "
            "process; a timeout of a few training steps plus a forward. Said again at "
            f"most once per {WINDOW_S:.0f} s while it lasts; the end-of-run line counts "
            "them all."
        )


_KEYS = ("answered", "answered_late", "expired")
