"""Repeated receiver problems as a periodic summary instead of a log line each.

A broken client, or a flood of incomplete samples, can produce thousands of dropped
messages a second: one log line each would drown the log (and cost the receiver more
than the drop). :class:`LogSummary` logs the first occurrence of each reason in full,
counts the others silently, and logs one summary line at most every `interval`
seconds (and when `flush` is called: at end of stream, at stop), e.g.::

    receiver of rank 0: in the last 30 s, dropped 15,903 incomplete samples (12
    simulations), rejected 40 messages (bad_field: 38, no_hello: 2) from 3 simulations,
    refused 57 samples holding NaN or Inf (temperature: 57) from 1 simulation (7)

(the simulations that sent non-finite samples are named, up to `NAMED`: a user looks
for them in their logs). The serving side uses it too: its I/O thread for the malformed
requests it rejects (REJECTED), `ServingHook` for the inferences that failed (FAILED, by
exception type: ``failed 12 inferences (RuntimeError: 12)``).

It only logs: the exact counters are the caller's (the receiver's telemetry).

Thread-safety: none; one thread calls it (the receiver's ingester, the serving I/O
thread), or its callers serialise their calls (`ServingHook`: a lock). `interval` and
the clock are in seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["FAILED", "INCOMPLETE", "LogSummary", "NONFINITE", "REJECTED"]

#: the kinds of event: a sample dropped incomplete, a message rejected, a sample
#: refused for NaN or Inf (see `melissa_trainer.stream.nonfinite`), a serving
#: inference that failed (`melissa_trainer.hooks.serving`; its reason: the exception's type)
INCOMPLETE, REJECTED, NONFINITE, FAILED = "incomplete", "rejected", "nonfinite", "failed"
#: each kind's words in a summary: the verb, the noun for one, the noun for several
#: ("failed 1 inference", not "1 inferences": a user trial read the latter)
_KINDS = (
    (INCOMPLETE, ("dropped", "incomplete sample", "incomplete samples")),
    (REJECTED, ("rejected", "message", "messages")),
    (NONFINITE, ("refused", "sample holding NaN or Inf", "samples holding NaN or Inf")),
    (FAILED, ("failed", "inference", "inferences")),
)
#: simulations named in a summary of non-finite samples
NAMED = 8
#: distinct simulations counted per kind and period (bounds the memory of a flood of
#: messages with random simulation ids); the summary then says "at least"
MAX_SIMULATIONS = 10_000


@dataclass
class _Period:
    """What happened since the last summary, for one kind of event."""

    counts: dict[str, int] = field(default_factory=dict)  # reason -> events
    simulations: set[int | None] = field(default_factory=set)


class LogSummary:
    """Logs the first event of each (kind, reason) in full, then periodic summaries.

    Args:
        logger: where the lines go (the detail lines at WARNING, summaries at WARNING).
        who: how a summary names its source ("receiver of rank 0").
        interval: the shortest time between two summaries, in seconds (> 0).
        clock: monotonic seconds (injected by tests).

    A period starts at each `flush` (a summary, due or forced) and ends at the first
    event or `tick` `interval` seconds later. In a new period the first event of a
    reason is again logged in full: a problem
    that comes back hours later is shown with its detail, while a sustained flood
    costs at most one line per reason and one summary per `interval`.
    """

    def __init__(
        self,
        logger: logging.Logger,
        who: str,
        interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"the log summary interval must be > 0 seconds, not {interval!r}")
        self._logger, self._who, self._interval, self._clock = logger, who, interval, clock
        self._periods = {kind: _Period() for kind, _ in _KINDS}
        self._shown: set[tuple[str, str]] = set()  # (kind, reason) logged in this period
        self._since = clock()
        #: True while some events were not logged in full: a summary is due
        self.pending = False

    def event(
        self,
        kind: str,
        reason: str,
        simulation: int | None,
        detail: str,
        *,
        exc_info: bool = False,
    ) -> None:
        """Record one event of `kind` (INCOMPLETE, REJECTED, NONFINITE or FAILED): logged
        in full (`detail` is the line; with `exc_info`, the exception being handled and
        its traceback too) if it is the first of its reason in this period, else counted
        for the period's summary. A period older than `interval` ends first (see
        `flush`). A FAILED summary names no simulations (an inference serves a batch)."""
        if self._clock() - self._since >= self._interval:
            self.flush()  # the period is over: its summary (if due), then a new one
        period = self._periods[kind]
        period.counts[reason] = period.counts.get(reason, 0) + 1
        if len(period.simulations) < MAX_SIMULATIONS:
            period.simulations.add(simulation)
        if (kind, reason) in self._shown:
            self.pending = True
        else:
            self._shown.add((kind, reason))
            self._logger.warning("%s", detail, exc_info=exc_info)

    def tick(self) -> None:
        """Log the summary if one is due and `interval` has passed since the last (or
        since the start); cheap otherwise. Call it when idle, so that the summary of a
        flood that stopped is not held back until the next event."""
        if self.pending and self._clock() - self._since >= self._interval:
            self.flush()

    def flush(self) -> None:
        """Log the summary now if any event was not logged in full; start a new period."""
        now = self._clock()
        if self.pending:
            self._logger.warning("%s", self._summary(now - self._since))
        self._periods = {kind: _Period() for kind, _ in _KINDS}
        self._shown.clear()
        self._since, self.pending = now, False

    def _summary(self, elapsed: float) -> str:
        parts = []
        for kind, (verb, one, many) in _KINDS:
            period = self._periods[kind]
            if not period.counts:
                continue
            count = sum(period.counts.values())
            text = f"{verb} {count:,} {one if count == 1 else many}"
            if kind != INCOMPLETE:  # by reason (the field, for NONFINITE)
                reasons = sorted(period.counts.items(), key=lambda item: (-item[1], item[0]))
                text += " (" + ", ".join(f"{r}: {n:,}" for r, n in reasons) + ")"
            if kind != FAILED:
                text += f" from {_simulations(period.simulations)}"
            if kind == NONFINITE:
                named = sorted(s for s in period.simulations if s is not None)
                more = ", ..." if len(named) > NAMED else ""
                text += f" ({', '.join(map(str, named[:NAMED]))}{more})"
            parts.append(text)
        # (a period under a second, a study stopped at once: not "in the last 0 s")
        span = "second" if elapsed < 1 else f"{elapsed:,.0f} s"
        return f"{self._who}: in the last {span}, " + ", ".join(parts)


def _simulations(sims: set[int | None]) -> str:
    """ "3 simulations", "at least 10,000 simulations", "unidentified senders", ..."""
    known = len(sims - {None})
    at_least = "at least " if len(sims) >= MAX_SIMULATIONS else ""
    text = f"{at_least}{known:,} simulation{'s' if known != 1 else ''}" if known else ""
    if None in sims:
        text += " and unidentified senders" if text else "unidentified senders"
    return text
