"""`ServingBudget`: how much of training time serving may take (a token bucket), and
when training counts as idle. Pure arithmetic on the seconds it is given: no clock.

Each step earns ``share`` x its training seconds of credit, kept up to `BURST_STEPS`
steps' worth (an idle spell does not buy a long pause later); each batch served
spends the seconds it took. A batch starts only while credit is left, so serving
exceeds its share by at most one batch, which the next steps repay: over a run,
serving seconds <= share x training seconds + one batch.

Idleness is judged on the steps' own durations (STEP_START to STEP_END, `record_step`),
not on the time between their ends: that time includes training's waits for data, and
a solver that waits for its prediction before sending the data training waits for made
the threshold grow with its own slowness, until every request timed out.
"""

from __future__ import annotations

import collections
import statistics

__all__ = ["BURST_STEPS", "IDLE_MIN", "IDLE_STEPS", "ServingBudget"]

#: the most steps' worth of serving credit kept
BURST_STEPS = 10
#: training counts as idle after this many typical step times without a step...
IDLE_STEPS = 3.0
#: ...and at least this many seconds
IDLE_MIN = 0.02
#: the recent step durations whose median is the typical step (a first step that
#: compiles, or one that writes a checkpoint, does not move it)
RECENT_STEPS = 16


class ServingBudget:
    """The credit of serving time (module docstring). `share` in (0, 1].

    Not thread-safe: the training thread earns and spends; a batch served while
    training was idle is not charged, but the wait it makes a step start late is
    (`spend`).
    """

    def __init__(self, share: float) -> None:
        if not isinstance(share, int | float) or isinstance(share, bool) or not 0 < share <= 1:
            raise ValueError(f"ServingHook.share must be in (0, 1], not {share!r}")
        self.share = float(share)
        self.credit = 0.0
        #: an exponential average of recent steps' training seconds
        self.step_time = 0.0
        self.training_seconds = 0.0
        self.serving_seconds = 0.0
        #: the recent steps' own durations (`record_step`), for `idle_after`
        self.step_durations: collections.deque[float] = collections.deque(maxlen=RECENT_STEPS)

    def earn(self, training_seconds: float) -> None:
        """A step trained for `training_seconds` (its time without serving)."""
        train = max(training_seconds, 0.0)
        self.training_seconds += train
        self.step_time = train if not self.step_time else 0.9 * self.step_time + 0.1 * train
        cap = self.share * BURST_STEPS * max(self.step_time, 1e-6)
        self.credit = min(self.credit + self.share * train, cap)

    def allows(self) -> bool:
        """Whether another batch may start now."""
        return self.credit > 0

    def spend(self, seconds: float) -> None:
        """Serving (or waiting for a batch served while idle) took `seconds`."""
        self.credit -= seconds
        self.serving_seconds += seconds

    def record_step(self, seconds: float) -> None:
        """A step ran for `seconds`, from its STEP_START to its STEP_END (its compute:
        no wait for data, no serving)."""
        self.step_durations.append(max(seconds, 0.0))

    def idle_after(self) -> float:
        """Seconds without a step after which training counts as idle: `IDLE_STEPS` x
        the median of the recent steps' own durations (`record_step`), at least
        `IDLE_MIN`. (Not the time between steps: a trainer that waits for data would
        count its waits as steps, and wait three of them before serving.)"""
        typical = statistics.median(self.step_durations) if self.step_durations else 0.0
        return max(IDLE_MIN, IDLE_STEPS * typical)

    @property
    def used_share(self) -> float:
        """Serving seconds charged / training seconds (0 before any step)."""
        return self.serving_seconds / self.training_seconds if self.training_seconds else 0.0
