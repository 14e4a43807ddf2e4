"""A `Study`'s starvation watch: a rank that waits for a batch no sample comes for
(`melissa_trainer.stream.starvation_watch`: the watch, its clock and its words) is
told, on rank 0, by its launcher, and on another rank, by what rank 0 published
(`study.progress`), whether the silence is explained, and what rank 0's state is.

A 2-rank trial of one-step simulations (all routed to rank 0 under the routing
``t % W``) sat at step 0 until killed, also with ``stall_timeout=60``: rank 1 had no
sample, rank 0 waited for it in the step agreement, its reservoir's rate limiter held
its inserts back, and the launcher, whose bound on ended simulations awaiting their
data (`Supervisor.data_bound`) those held inserts kept full, started no more. rank 1's
receiver excused its silence as the launcher's start-up allowance (a rank other than 0
cannot ask the launcher), rank 0's, blocked on its full buffer, made no empty poll.

What the study does about it, in order:

* **Progress first.** A rank other than 0 whose wait has had no sample for
  `REPORT_AFTER` s tells rank 0 (`progress.report_starving`); while it does and rank
  0's receiver is back-pressured, rank 0's launcher raises that bound from `job_limit`
  to 2 x `job_limit` (`Launcher.lift_data_bound`): rank 0 waits for the starved rank,
  so only a new simulation can feed it, and starting one early breaks nothing (it is a
  simulation of the study, run once, its steps deduplicated as any; the memory of data
  in flight stays bounded, by one more `job_limit` of simulations' data).
* **A certain deadlock is said at once** (`DeadlockCheck`), not after `stall_timeout`:
  rank 0 published, in two writes `DEADLOCK_GRACE` s apart with the same counts (no
  simulation ended, finished or started meanwhile: rank 0 took in nothing), that it
  knows of this rank's starvation and raised the bound, that no simulation runs (none
  queued or starting either), that its receiver waits for room, and that simulations
  are left to start but the raised bound keeps them back; and this rank got no sample
  meanwhile. Then nothing can feed this rank: its data can only come from a new
  simulation, which needs rank 0 to take in the ended ones', which needs rank 0 to
  train, which needs this rank's batch. The grace covers a rank 0 still busy with
  work of its own, which draws nothing (its window's steps, the actions and hooks after
  them): a rank 0 behind would draw, and its counts move, once done. So it scales with
  what rank 0's training does (`stale`): rank 0 publishes its training thread's reads
  of its buffer (`ReadClock`: it reads a window's batches, then runs the window's steps,
  which read nothing), and the deadlock needs too that rank 0 has made no read in those
  writes and has stayed away from its buffer (no read, no wait for data) for
  max(`DEADLOCK_GRACE`, `AWAY_FACTOR` x the longest it stayed away between two of its
  recent reads, ``away_max``). A rank 0 making steps, slow ones too, reads once a window
  and waits for data when it has none: never called deadlocked. Nor while it is in work
  of its own, which a pause on rank 0 alone is (a hook on its main process only,
  plotting or uploading in `on_log`; the rank-0 part of a save, its rotation): its
  trainer tells the same clock of every hook dispatch and action point
  (`ReadClock.work_began`, published as ``own_work_for``), and the time away counts
  from the later of its last read and the end of its last own work (``own_work_ago``);
  ``away_max`` leaves such work out too (else a 5-minute evaluation among its recent
  reads would scale the grace to 10 minutes: excused twice). Own work excuses a rank 0
  behind this rank only (its ``reads`` fewer than this rank's, the read this rank
  waits in counted: `ahead`), which reads once done. One that has begun as many reads
  holds its batches of the window this rank waits in (each rank takes one read per
  batch, as many batches per window as the others, and the ranks agree on a window
  before any rank reads the next), so it reads nothing before that agreement, which
  needs this rank's batch: its own work, a slow hook or a user's collective in a hook
  that waits for this rank, is not excused. On CPU (gloo) the agreement's start waits
  for every rank, so rank 0 blocks there, out of any hook
  (tests/trainer/test_starved_hook_collective.py); on CUDA it does not block the host,
  and rank 0 runs on into the steps of the window in hand (which this rank runs only
  once it holds the next window's batches), where a hook's collective whose result it
  reads (an all-reduce in `on_step_start`, then ``.item()``) is where it waits
  (tests/study/test_starvation_ahead.py). The deadlock is then said by
  max(t_s + `DEADLOCK_GRACE`, t_r + max(`DEADLOCK_GRACE`, `AWAY_FACTOR` x
  ``away_max``)) + `REFRESH` + 1 s, where t_s is when rank 0 first published the state
  above, t_r the later of its training thread's last read or wait for data and its
  last own work's end, `REFRESH` the period of its rewrites while held and 1 s that of
  this rank's reads of the file: with steps of milliseconds, by the later of t_s + 26 s
  and t_r + 26 s, however long its hooks and actions among them
  (tests/study/test_starvation_away_own_work.py); with windows of one 30 s step, by
  the later of t_s + 26 s and t_r + 66 s. An older rank 0's progress, without the
  reads: the two writes alone, by t_s + 26 s.
* **A failed study is said at once**, by its launcher's words (`failed_words`): once
  rank 0's launcher gives up (its failure policy), rank 0 publishes its error
  (``failed``, `study.progress`), and another rank's wait for a batch, starved or not,
  ends with it at its next read of the file (at most 1 s): rank 0, blocked in the step
  agreement on that rank, would never read its source, which raises it, and its
  progress file, no longer rewritten, would never show a deadlock either.
* What another rank quotes of rank 0's state says how old it is (``written``) when
  older than a rewrite's period (`rank0_words`).
* With nothing left to start (the study's end) it is no deadlock: rank 0's end notice
  (`study.end_notice`) tells this rank the study ended, its stream ends and training
  ends with it, padded. Otherwise the stall watch of `stall_timeout` stands, as before:
  a silence the launcher does not explain (rank 0: `Launcher.silence_explained`, jobs
  queued or within their start-up allowance; another rank: what rank 0 published, if
  at most `EXCUSE_AGE` old by its ``alive``, rewritten every `REFRESH` s whatever the
  launcher's poll_interval, or else the start-up allowance, `other_rank_excuse`:
  `rank0_excuse`) fails the wait, naming rank 0's state when known.

What another rank says of rank 0's state, from its progress file, is `progress_words`'s.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from melissa_trainer.buffers import Buffer
from melissa_trainer.launcher import Launcher
from melissa_trainer.stream.starvation_watch import StarvationWatch
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study.launch import other_rank_excuse
from melissa_trainer.study.progress import (
    clear_starving,
    read_progress,
    report_starving,
)
from melissa_trainer.study.progress_words import (
    counted,
    failed_words,
    launcher_words,
    rank0_excuse,
    rank0_words,
    seconds,
)

__all__ = ["AWAY_FACTOR", "DEADLOCK_GRACE", "DeadlockCheck", "ahead", "study_watch"]

#: seconds (of rank 0's clock) between two writes of rank 0's progress that must both
#: say the deadlock, with nothing changed between them, before it is said
DEADLOCK_GRACE = 20.0
#: times the longest that rank 0's training thread recently stayed away from its buffer
#: between two reads (its window's steps) that it must have stayed away now, when its
#: progress says (module docstring): its current window may take longer than the last
AWAY_FACTOR = 2.0
#: rank 0's counts that must not move in the deadlock ("reads": None in an older file)
COUNTS = ("jobs_alive", "pending", "exited", "finished", "reads")


class DeadlockCheck:
    """Whether what rank 0 published (`study.progress`) says that a starved rank's
    wait can never end (module docstring); the words for its message, or None.
    Call with each read of rank 0's progress while the wait is reported (a new wait:
    a new check, or `reset`)."""

    def __init__(self, rank: int, grace: float = DEADLOCK_GRACE) -> None:
        self.rank, self.grace = rank, grace
        self._first: tuple[float, tuple[Any, ...]] | None = None  # (written, counts)

    def reset(self) -> None:
        self._first = None

    def __call__(self, progress: dict[str, Any] | None, mine: int | None = None) -> str | None:
        """`mine`: the reads this rank began (its `ReadClock.count`: the one it waits
        in counted), or None when not known (`stale`)."""
        if progress is None or not self._stuck(progress):
            self._first = None
            return None
        written = float(progress.get("written", 0.0))
        counts = tuple(progress.get(k) for k in COUNTS)
        if self._first is None or self._first[1] != counts:
            self._first = (written, counts)
            return None
        if written - self._first[0] < self.grace or not self.stale(progress, mine):
            return None
        where = (
            "in the step agreement"
            if seconds(progress.get("own_work_for")) is None
            else "in a hook or an action, a collective in it or after it waiting for every rank"
        )
        return (
            f"No simulation runs; rank 0's receiver has waited for room in its buffer for "
            f"{float(progress['backpressured_for']):.0f} s (its training waits for rank "
            f"{self.rank} {where}, so it takes nothing in), and its launcher "
            f"starts none of the {counted(progress.get('pending'), 'simulation')} left: "
            f"{progress.get('exited')} that ended await their data on rank 0, more than its "
            f"bound of {progress.get('bound')} (2 x job_limit, raised for this starved rank: "
            f"the bound keeps short simulations' data from queueing without limit in "
            f"memory). A deadlock, stopped now rather than after stall_timeout. "
        )

    def stale(self, progress: dict[str, Any], mine: int | None = None) -> bool:
        """Whether rank 0's training thread has stayed away from its buffer long enough,
        out of work of its own (module docstring): False while it is in such work
        (``own_work_for`` given) and behind this rank (`ahead`: not known, or not);
        else the least of ``away_for`` and ``own_work_ago`` (those given) >= max(grace,
        `AWAY_FACTOR` x ``away_max``); True when its progress gives neither (an older
        rank 0's, or no read nor own work yet)."""
        if seconds(progress.get("own_work_for")) is not None and not ahead(progress, mine):
            return False  # (a hook, an action: it comes back by itself, then reads)
        away, longest = seconds(progress.get("away_for")), seconds(progress.get("away_max"))
        out = seconds(progress.get("own_work_ago"))  # (no read yet: since its own work)
        times = [t for t in (away, out) if t is not None]
        if not times:
            return True
        return min(times) >= max(self.grace, AWAY_FACTOR * (longest or 0.0))

    def _stuck(self, progress: dict[str, Any]) -> bool:
        return bool(
            self.rank in (progress.get("starving") or ())
            and progress.get("lifted")
            and progress.get("running") == 0
            and progress.get("backpressured_for") is not None
            and progress.get("held_by_bound")
        )


def ahead(progress: dict[str, Any], mine: int | None) -> bool:
    """Whether rank 0 has begun at least `mine` reads (its published ``reads``): this
    rank's count, the read it waits in counted. Every rank takes one read per batch and
    as many batches per window as the others (one window's agreement before the next
    window's reads), so rank 0 then holds its batches of the window this rank waits in
    and reads no more before the ranks' agreement on that window, which needs this
    rank's batch: whatever work of its own it is in (a slow hook, or one waiting in a
    collective for this rank) ends with no read. False when either count is not known
    (an older rank 0's file, or no count given). Both counts run from their process's
    start: alike on every rank, which resumes with as many pending batches as the
    others (none after a resize)."""
    reads = progress.get("reads")
    if mine is None or isinstance(reads, bool) or not isinstance(reads, int):
        return False
    return mine > 0 and reads >= mine


def study_watch(
    launcher: Launcher, stream: StreamSource, buffer: Buffer, rank: int, world: int
) -> StarvationWatch:
    """The watch of a `Study`'s rank (after its stream's `start`, whose own watch, of
    external mode, it replaces): on rank 0 its launcher explains a silence and
    describes itself; on another rank what rank 0 published in the rendezvous directory
    does (`study.progress`, read at most once a second), or without it the launcher's
    start-up allowance (`other_rank_excuse`); that rank also reports its starvation to
    rank 0 and fails at once on a certain deadlock (module docstring). Rank 0's watch
    counts its reads (`StarvationWatch.reads`), which `Study` has its progress publish."""
    stream.starvation = None  # (this watch instead: `Study.wait_for` runs it)
    config = stream.config
    rendezvous, run_id = Path(config.rendezvous_dir or "."), config.run_id

    def put() -> int:
        receiver = stream.receiver
        return 0 if receiver is None else receiver.ingest.samples_put

    fallback = other_rank_excuse(launcher.tuning)  # (the receiver's, on a rank but 0)
    stream_excuse = launcher.silence_explained if rank == 0 else fallback

    def stream_has_it() -> bool:
        receiver = stream.receiver
        idle = 0.0 if receiver is None else receiver.idle_seconds()
        return idle > 0 and (stream_excuse is None or stream_excuse(idle) is None)

    if rank == 0:
        return StarvationWatch(
            rank, world, config.stall_timeout,
            launcher.silence_explained,
            lambda: launcher_words(
                launcher.summary(), launcher.jobs_alive(), launcher.data_backpressured()
            ),
            put, buffer.stats, stream_has_it=stream_has_it,
        )  # fmt: skip
    read: list[Any] = [-float("inf"), None]  # (when, what) of the last read

    def progress() -> dict[str, Any] | None:
        now = time.monotonic()
        if now - read[0] >= 1.0:
            read[:] = [now, read_progress(rendezvous, run_id)]
        return read[1]

    def excuse(idle: float) -> str | None:
        return rank0_excuse(progress(), idle, fallback)

    check = DeadlockCheck(rank)
    clear_starving(rendezvous, rank)  # (an earlier run's report, left by its failure)

    def report(idle: float | None) -> None:
        check.reset()
        if idle is None:
            clear_starving(rendezvous, rank)
        else:
            report_starving(rendezvous, run_id, rank, time.time() - idle)

    watch = StarvationWatch(
        rank, world, config.stall_timeout, excuse, lambda: rank0_words(progress(), rank),
        put, buffer.stats, stream_has_it=stream_has_it, report=report,
        deadlock=lambda idle, wanted: check(progress(), watch.reads.count),
        failed=lambda wanted: failed_words(progress(), rank, world, wanted),
    )  # fmt: skip
    return watch
