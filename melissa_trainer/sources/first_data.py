"""When a source says that training waits for its first data.

Until a source's first sample arrives the trainer has no step to show: the progress bar
stays at ``0step`` and a run whose data is late (a solver's slow start-up) or will never
come (simulations pointed at the wrong address) looks hung, without a word.
`FirstDataWait` times that wait, and the source says what the user should know and check,
in its own words: a `Study` (`melissa_trainer.study.first_data`: how many simulations
run, how long one may stay silent), a `StreamSource` in external mode (the address it
listens on, where the simulations find it).

The notice is due once, `after` seconds (`FIRST_DATA_NOTICE` by default) after the
producer started (`started`: the simulations launched, the receiver listening), if no
sample has been put since; a sample before then silences it for good.

Used from the training thread only (no lock).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["FIRST_DATA_NOTICE", "FirstDataWait"]

#: seconds of waiting with no sample received since the producer started before the
#: source says that training waits for its first data
FIRST_DATA_NOTICE = 15.0


class FirstDataWait:
    """Whether the first-data notice is due (module docstring); a source says it.

    Args:
        after: seconds of waiting before the notice (`FIRST_DATA_NOTICE` by default, its
            value at construction).
        clock: seconds, monotonic (`time.monotonic` by default; a test gives its own).
    """

    def __init__(
        self, after: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.after = FIRST_DATA_NOTICE if after is None else float(after)
        self.clock = clock
        self._since: float | None = None  # when the producer started
        self._samples_then = 0  # the samples put by then (a resume has some)
        self._done = False

    def started(self, samples: int) -> None:
        """The producer has just started; `samples`: its count of samples put so far."""
        self._since, self._samples_then = self.clock(), samples

    def due(self, samples: int) -> float | None:
        """Called while training waits for data, with the count of samples put so far:
        the seconds waited when the notice is due now (once: None at every later call),
        else None. None before `started`, and for good once a sample has come."""
        if self._done or self._since is None:
            return None
        if samples > self._samples_then:
            self._done = True  # data came: nothing to say, ever
            return None
        waited = self.clock() - self._since
        if waited < self.after:
            return None
        self._done = True
        return waited
