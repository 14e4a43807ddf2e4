"""Rank 0's notice while training waits for a study's first data.

A solver with a slow start-up (a JIT compilation, a large mesh to read, a licence to
wait for) sends nothing for a while, and until its first sample arrives the trainer has
no step to show: the progress bar stays at ``0step`` and the run looks hung. After
`FIRST_DATA_NOTICE` seconds of waiting with no sample received since the simulations
were started, rank 0 says once (a WARNING, which Python prints without any logging set
up) that it waits, how many simulations run and how many their scheduler still queues
(Slurm's PENDING, with its reason: `Launcher.queued`), and how long a simulation may stay silent
before the launcher kills it as hung (`LauncherTuning.startup_timeout`); in worker mode,
how many workers were started and that no timeout bounds their start-up (the launcher's
timeouts start once a worker has taken a simulation: `melissa_trainer.launcher.worker_mode`;
the start-up is measured, `Launcher.summary()['startup_seconds']`). Neither needs the
stream's `stall_timeout` raised with it: the study's stall watchdog waits while the
launcher explains the silence (`melissa_trainer.launcher.expected_silence`). When the notice
is due is `melissa_trainer.sources.first_data`'s (`FirstDataWait`, which a `StreamSource`
in external mode uses for its own notice; a study turns that one off).

Used from the training thread only (no lock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from melissa_trainer.common.words import plural
from melissa_trainer.core.data_wait import in_queue
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.silence import AUTO
from melissa_trainer.sources.first_data import FirstDataWait

__all__ = ["FirstDataNotice"]

logger = logging.getLogger("melissa_trainer.study")


def startup_allowance(launcher: Launcher) -> str:
    """How long a simulation may send nothing before it is killed as hung, in words."""
    tuning = launcher.tuning
    timeout = tuning.simulation_timeout
    if timeout is None:
        return "no simulation is killed for its silence (simulation_timeout=None)"
    if timeout != AUTO:
        allowance = tuning.startup_allowance()
        if allowance is None:  # (startup_timeout=None, set)
            return "no simulation is killed before its first message (startup_timeout=None)"
        if not tuning.startup_set:
            return (
                f"a simulation that sends nothing for {float(timeout):g} s is killed as hung "
                f"(LauncherTuning.simulation_timeout, which bounds the start-up too while "
                f"startup_timeout is unset: set startup_timeout for a slower start-up)"
            )
        return (
            f"a simulation that sends nothing for {allowance:g} s before its first "
            f"message is killed as hung and restarted (max(simulation_timeout, "
            f"startup_timeout)): raise LauncherTuning(startup_timeout=...) for a slower "
            f"start-up"
        )
    if tuning.startup_timeout is None:
        return "no simulation is killed before its first message (startup_timeout=None)"
    return (
        f"a simulation that sends nothing for {tuning.startup_timeout:g} s is killed as "
        f"hung and restarted: raise LauncherTuning(startup_timeout=...) for a slower "
        f"start-up (the stream's stall_timeout waits as long)"
    )


class FirstDataNotice:
    """Says once that training waits for the study's first data (module docstring).

    Args:
        after: seconds of waiting before the notice (`FIRST_DATA_NOTICE` by default,
            its value at construction).
        clock: seconds, monotonic (`time.monotonic` by default; a test gives its own).
    """

    def __init__(
        self, after: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        #: when the notice is due (`sources.first_data`, shared with `StreamSource`'s)
        self.wait = FirstDataWait(after, clock)
        self._logs = Path("logs")

    @property
    def after(self) -> float:
        """Seconds of waiting before the notice."""
        return self.wait.after

    @after.setter
    def after(self, seconds: float) -> None:
        self.wait.after = float(seconds)

    def started(self, samples: int, logs: Path) -> None:
        """The launcher has just started the simulations; `samples` is the receiver's
        count of samples put so far, `logs` the launcher's job-log directory (its
        `log_dir`: the user's, else `{study_dir}/logs`)."""
        self.wait.started(samples)
        self._logs = logs

    def check(self, samples: int, launcher: Launcher) -> bool:
        """Called while training waits for data, with the receiver's count of samples
        put so far; logs the notice once it is due (True when it did, now)."""
        waited = self.wait.due(samples)
        if waited is None:
            return False
        summary = launcher.summary()
        # a job its scheduler still queues is launched, not running: say which is which
        queued, reasons = launcher.queued()
        if launcher.worker:  # workers pay their start-up before they take a simulation
            logger.warning(
                "no data yet, %.0f s after the first workers were launched (worker mode): "
                "%s started%s, %s taken and running, %d restarted so "
                "far; training waits for their first samples. A worker's start-up (imports, JIT "
                "compilation, reading a mesh) counts here and no timeout of the "
                "launcher bounds it (they start once a worker has taken a simulation, "
                "next_simulation()); "
                "with no message at all, the stream stops the study after "
                "ReceiverConfig(stall_timeout=...) or LauncherTuning(startup_timeout=...) "
                "s from a worker's start, whichever is longer. Their output: the "
                "launcher's log_dir (%s). "
                "Said once per study.",
                waited,
                plural(max(0, launcher.jobs_alive() - queued), "worker"),  # (never below 0)
                in_queue(queued, reasons, "worker"),
                plural(int(summary["running"]), "simulation"),
                summary["restarts"],
                self._logs,
            )
            return True
        logger.warning(
            "no data yet, %.0f s after the first simulations were launched: %d running%s, "
            "%d restarted so far; training waits for their first samples. A "
            "solver's start-up (imports, JIT compilation, reading a mesh) counts here; %s. "
            "Their output: the launcher's log_dir (%s). Said once per study.",
            waited,
            max(0, int(summary["running"]) - queued),  # (a queued job's simulation is "running")
            in_queue(queued, reasons, "simulation"),
            summary["restarts"],
            startup_allowance(launcher),
            self._logs,
        )
        return True
