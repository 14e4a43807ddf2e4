"""Rank 0's notice while training waits for a study's first data.

A solver with a slow start-up (a JIT compilation, a large mesh to read, a licence to
wait for) sends nothing for a while, and until its first sample arrives the trainer has
no step to show: the progress bar stays at ``0step`` and the run looks hung. After
`FIRST_DATA_NOTICE` seconds of waiting with no sample received since the simulations
were started, rank 0 says once (a WARNING, which Python prints without any logging set
up) that it waits, how many simulations run, and how long a simulation may stay silent
before the launcher kills it as hung (`LauncherTuning.startup_timeout`).

Used from the training thread only (no lock).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.silence import AUTO

__all__ = ["FIRST_DATA_NOTICE", "FirstDataNotice"]

logger = logging.getLogger("melissa_trainer.study")

#: seconds of waiting with no sample received since the simulations started before
#: rank 0 says that it waits for their first data
FIRST_DATA_NOTICE = 15.0


def startup_allowance(launcher: Launcher) -> str:
    """How long a simulation may send nothing before it is killed as hung, in words."""
    tuning = launcher.tuning
    timeout = tuning.simulation_timeout
    if timeout is None:
        return "no simulation is killed for its silence (simulation_timeout=None)"
    if timeout != AUTO:
        return (
            f"a simulation that sends nothing for {float(timeout):g} s is killed as hung "
            f"(LauncherTuning.simulation_timeout)"
        )
    if tuning.startup_timeout is None:
        return "no simulation is killed before its first message (startup_timeout=None)"
    return (
        f"a simulation that sends nothing for {tuning.startup_timeout:g} s is killed as "
        f"hung and restarted: raise LauncherTuning(startup_timeout=...) for a slower "
        f"start-up"
    )


class FirstDataNotice:
    """Says once that training waits for the study's first data (module docstring).

    Args:
        after: seconds of waiting before the notice (`FIRST_DATA_NOTICE` by default,
            its value at construction).
    """

    def __init__(self, after: float | None = None) -> None:
        self.after = FIRST_DATA_NOTICE if after is None else float(after)
        self._since: float | None = None  # when the simulations were started
        self._samples_then = 0  # the receiver's samples at that time (a resume has some)
        self._done = False
        self._logs = Path("logs")

    def started(self, samples: int, study_dir: Path) -> None:
        """The launcher has just started the simulations; `samples` is the receiver's
        count of samples put so far, `study_dir` the launcher's study directory."""
        self._since, self._samples_then = time.monotonic(), samples
        self._logs = study_dir / "logs"

    def check(self, samples: int, launcher: Launcher) -> bool:
        """Called while training waits for data, with the receiver's count of samples
        put so far; logs the notice once it is due (True when it did, now)."""
        if self._done or self._since is None:
            return False
        if samples > self._samples_then:
            self._done = True  # data came: nothing to say, ever
            return False
        waited = time.monotonic() - self._since
        if waited < self.after:
            return False
        self._done = True
        summary = launcher.summary()
        worker = " (worker mode)" if launcher.worker else ""
        logger.warning(
            "no data yet, %.0f s after the first simulations were started%s: %d running, "
            "%d restarted so far; training waits for their first samples. A "
            "solver's start-up (imports, JIT compilation, reading a mesh) counts here; %s. "
            "Their output: the launcher's log_dir (%s by default). Said once per study.",
            waited,
            worker,
            summary["running"],
            summary["restarts"],
            startup_allowance(launcher),
            self._logs,
        )
        return True
