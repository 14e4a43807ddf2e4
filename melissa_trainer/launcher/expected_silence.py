"""When the launcher knows why the stream is silent: its jobs have not started sending yet.

The receiver's stall watchdog (`ReceiverConfig.stall_timeout`) fails a study whose
stream stayed silent that long. Before the simulations' first messages that silence is
often expected, and the launcher knows it: `explain_silence`, computed by the
supervisor's thread at each tick, says what the stream waits for when **every** job
alive is one of

* a simulation not started by its scheduler yet (queued: Slurm's ``PENDING``), which
  the scheduler bounds (it starts the job, or ends it and the launcher sees the exit);
* a simulation started and silent since its launch, within its start-up allowance
  (`SilenceClock.bound` before a first message: ``max(startup_timeout, ...)``, a
  numeric `simulation_timeout`, or the larger of it and a `startup_timeout` the user
  set), which the launcher enforces: past it the job is killed
  as hung, and a restart gets a new allowance within `max_restarts`;
* in worker mode, a worker that has not asked for a simulation yet, within that same
  allowance from its launch (no kill enforces it: past it the excuse ends and the
  stall watchdog applies again);
* a simulation whose every step reached the buffer (`RunningJob.complete`), ending
  (its exit, its own output), silent since its last message within that same
  allowance, which the launcher enforces as it does a start-up's
  (`melissa_trainer.launcher.silence`).

Anything else is not explained, and the watchdog applies as before: no job alive, a job
that has sent and is silent again (mid-stream silence: `simulation_timeout` kills
it sooner by default), a start-up with no bound (``startup_timeout=None`` or
``simulation_timeout=None``: nothing else would end that silence), a start-up past its
allowance, a worker between two simulations. So no silence is excused forever, except
a job that its scheduler keeps queued forever (the log line says "queued").

Used by the supervisor's thread at the end of each tick; the answer is a plain string,
read from any thread (`Launcher.silence_explained`), as of the last tick: late by a
tick at most, or by the time a tick spends killing a job (`kill_grace`); a tick that
has not completed for `launcher_record.EXCUSE_LIFETIME` s beyond the poll interval (the
thread hung in a backend call) leaves no excuse.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.backends.base import Handle
from melissa_trainer.launcher.jobs import RunningJob
from melissa_trainer.launcher.silence import SilenceClock

__all__ = ["explain_silence", "queued_jobs"]


def explain_silence(
    jobs: Mapping[str, RunningJob],
    silence: SilenceClock,
    started: Callable[[Handle], bool],
    launched_at: Mapping[str, float],
    now: float,
) -> str | None:
    """What the stream waits for, in words, if every job in `jobs` is queued or within
    its start-up allowance (module docstring); None otherwise. `started`: the
    backend's `started`; `launched_at`: worker mode's launch times of the workers not
    heard from yet (empty otherwise); `now`: `time.monotonic()`."""
    if not jobs:
        return None
    bound = silence.bound(sending=False)  # (an ending attempt's too: `SilenceClock.bound`)
    queued = starting = workers = ending = 0
    for name, job in jobs.items():
        if job.simulation_id is None:  # worker mode: a worker, no simulation taken
            since = launched_at.get(name)
            if since is None or bound is None or now - since > bound[0]:
                return None
            workers += 1
        elif job.sending:
            if not job.complete or bound is None or job.silent > bound[0]:
                return None
            ending += 1
        elif not started(job.handle):
            queued += 1
        elif bound is None or job.silent > bound[0]:
            return None
        else:
            starting += 1
    parts = []
    if starting or workers or ending:
        assert bound is not None  # (else not explained, above)
        seconds, rule = bound
        if starting:
            parts.append(
                f"{plural(starting, 'simulation')} before {_their(starting)} first message, "
                f"within {_their(starting)} start-up allowance ({seconds:g} s, {rule}; killed "
                f"as hung past it)"
            )
        if workers:
            parts.append(f"{plural(workers, 'worker')} starting up (allowed {seconds:g} s each)")
        if ending:
            parts.append(
                f"{plural(ending, 'simulation')} ending, {_their(ending)} data complete, within "
                f"the same allowance ({seconds:g} s; killed past it)"
            )
    if queued:
        parts.append(f"{plural(queued, 'job')} queued by the scheduler (not started yet)")
    return "the launcher waits for " + "; ".join(parts)


def _their(count: int) -> str:
    """The possessive for `count` simulations: "its" for one."""
    return "its" if count == 1 else "their"


def queued_jobs(
    jobs: Mapping[str, RunningJob],
    started: Callable[[Handle], bool],
    reason: Callable[[Handle], str | None],
) -> tuple[int, dict[str, int]]:
    """How many of `jobs` their scheduler still queues (not `started`: the backend's
    `started`), and how many of those for each reason it gave (the backend's
    `queue_reason`; the jobs it gave none for are only in the count). What the
    first-data notice says instead of calling a queued simulation running."""
    queued, reasons = 0, Counter[str]()
    for job in jobs.values():
        if not started(job.handle):
            queued += 1
            why = reason(job.handle)
            if why:
                reasons[why] += 1
    return queued, dict(reasons)
