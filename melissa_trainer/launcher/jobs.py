"""What a supervisor keeps of its configuration and its jobs: `Settings` (the launcher's
configuration as a supervisor reads it, checked by `Launcher`) and `RunningJob` (a job
alive in the backend, the simulation it runs and the figures of its attempt). Data only;
the supervisor's thread changes a `RunningJob`, other threads read it best-effort.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.launcher.backends.base import Handle
from melissa_trainer.launcher.tuning import LauncherTuning

__all__ = ["RunningJob", "Settings"]


@dataclass(frozen=True)
class Settings:
    """The launcher's configuration, as the supervisor needs it (checked by `Launcher`)."""

    job_limit: int
    ranks: int
    tuning: LauncherTuning  # timeouts and poll interval; the failure policy: StudyRecord
    env: Mapping[str, str]
    log_dir: Path
    rendezvous_dir: str
    worker_hint: str | None = None  # `Launcher`'s: named in the start-up advice


@dataclass
class RunningJob:
    """A job alive in the backend, and the simulation it runs (None: a worker between two)."""

    handle: Handle
    simulation_id: int | None
    log_path: Path
    since: float = 0.0  # when the current simulation started
    beat: int = 0  # heartbeat value at the last progress seen
    silent: float = 0.0  # its own silence since then, in seconds (`silence.SilenceClock`)
    sending: bool = False  # a message of this attempt came
    startup: float | None = None  # wall seconds from `since` to its first message
    quiet_at: float = 0.0  # the last tick that found no message of this attempt yet
    complete: bool = False  # its every step reached the buffer (as of a tick): ending
    # its backend said it started at a tick of the silence watch, and has not said it
    # queued since: only such a job "not started" again was requeued (`SilenceWatch`);
    # a job's, not a simulation's (`assign` keeps it: worker mode's job runs on)
    ran: bool = False
    # `SilenceWatch.requeued` found it back in its queue and its backend has not said it
    # started since: a message then (a late one of the run before) is no sign it runs
    back_in_queue: bool = False
    #: its longest silence between two of its messages, None before a second one (a
    #: kill's line says how much sooner a hang could be caught: `SilenceClock.sooner`)
    gap: float | None = None

    def assign(self, simulation_id: int | None, now: float, beat: int) -> None:
        self.simulation_id, self.since, self.beat = simulation_id, now, beat
        self.silent, self.sending, self.startup, self.quiet_at = 0.0, False, None, now
        self.complete, self.gap = False, None
