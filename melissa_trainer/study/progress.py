"""Rank 0's word on the study's progress, for the other ranks: a small JSON file.

A rank other than 0 that waits for a batch no sample comes for (`study.starvation`)
must tell a study still starting up (its silence explained: wait) from one that cannot
progress (fail, saying why). Only rank 0's launcher knows, and that rank's training
thread may be blocked in the ranks' step agreement, waiting for the very rank that
asks. So rank 0's study-end thread (`study.end_notice`, which polls the launcher
anyway) writes what the other ranks need into ``{rendezvous}/study_progress.json``
(the rendezvous directory is shared by every rank and read by every client; clients
read only ``rank_<r>.json`` there):

* ``explained``: what the launcher says the stream's silence waits for
  (`Launcher.silence_explained`: jobs queued, or within their start-up allowance), or
  None: a silence is not explained;
* ``backpressured_for``: None, or the seconds rank 0's receiver has waited for room in
  its buffer (`Launcher.data_backpressured`) as of ``written``;
* the launcher's counts: ``jobs_alive``, ``running``, ``pending``, ``exited``
  (ended, their data not all in on rank 0), ``finished``;
* ``starving``: the ranks that report a wait for a batch no sample comes for (each
  writes ``starving-rank-<r>.json`` there, `report_starving`, and removes it when a
  sample comes or its wait ends); ``lifted``: whether the launcher's bound on ended
  simulations awaiting their data is raised for them (`Launcher.lift_data_bound`: it
  is while a rank starves and rank 0 is back-pressured: only more simulations can
  feed that rank, since rank 0 waits for it); ``held_by_bound`` and ``bound``:
  whether that bound keeps simulations left to start from starting, and its value
  (`Launcher.held_by_data_bound`);
* ``failed``: None, or the launcher's error once the study has failed for good
  (`ProgressFile.failed`, written at once): another rank's wait for a batch then ends
  with it (`study.starvation`), since rank 0, blocked in the step agreement on that
  rank, may never read its source, which raises it;
* ``run_id`` (a file of an earlier run is not read as this one's) and ``written``
  (wall-clock seconds: a reader says how old what it quotes is);
* ``alive`` (wall-clock seconds): when rank 0 last wrote ``explained``, taken then from
  `Launcher.silence_explained` (an attribute read, as of the launcher's last tick: what
  rank 0's own watch reads). `ProgressFile.beat` rewrites these two alone every
  `REFRESH` s while ``explained`` is set (or was, to withdraw it), from a thread of its
  own (`study.end_notice`): the full `update` comes once per launcher poll
  (``poll_interval``, unbounded: 30 s on a busy Slurm) and waits for
  `Launcher.summary`, which waits for the launcher's lock (a slow ``squeue``), so it
  alone would let a true excuse read stale. The counts stay as of ``written``;
* once the study gives rank 0's training thread's reads of its buffer (`reads`: its
  starvation watch's `ReadClock`): ``reads`` (how many it began), ``away_for`` (seconds
  since it last came to its source, a read or a wait for one, as of ``written``) and
  ``away_max`` (the longest it stayed away between two recent reads: its window's
  steps, its own work left out); ``own_work_for`` (seconds it has been in work of its
  own, a hook call or an action point, None when not) and ``own_work_ago`` (seconds
  since it last left such work, None before). A file without them (an older rank 0's)
  is read as before (`study.starvation`).

It is rewritten (write aside, then rename: a reader never sees half a file) only when
one of these changes (but the reads, which are only carried along), or at a poll at
least `REFRESH` s after the last while rank 0 is back-pressured or its ``explained`` is
set, and by `beat` as said: a few writes a minute at most, none per sample. A reader
takes a missing, unreadable or other run's file as "not known", and an ``explained``
older than `EXCUSE_AGE` (by ``alive``; by ``written`` in an older rank 0's file without
it) as not known either: a dead or stopped rank 0, which no longer beats, or an
earlier run's file, excuses no silence (`study.starvation.rank0_excuse`); a live one's
true excuse stays fresh whatever its poll_interval and however slow its summary.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from melissa_trainer.launcher import Launcher
from melissa_trainer.stream.read_clock import ReadClock

__all__ = [
    "PROGRESS_FILE",
    "EXCUSE_AGE",
    "REFRESH",
    "ProgressFile",
    "clear_starving",
    "read_progress",
    "read_starving",
    "report_starving",
]

logger = logging.getLogger(__name__)

#: the file's name in the rendezvous directory
PROGRESS_FILE = "study_progress.json"
#: a starving rank's report: this prefix, its rank, ".json" (`report_starving`)
STARVING_PREFIX = "starving-rank-"
#: seconds between two reads of the starving ranks' reports (at rank 0's polls)
STARVING_READ = 1.0
#: seconds between two writes while nothing but the back-pressure's duration changes
REFRESH = 5.0
#: the oldest (seconds, by its ``alive``) that a reader takes rank 0's ``explained``
#: for (`study.starvation.rank0_excuse`): rank 0 beats every `REFRESH` s while set,
#: whatever its poll_interval (`ProgressFile.beat`), so an older one is a rank 0 that
#: no longer beats (stopped, gone) or an earlier run's file; three beats' room, for a
#: busy rank 0's node and the nodes' clocks
EXCUSE_AGE = 3 * REFRESH
#: the most characters of the launcher's error that ``failed`` keeps (its report)
FAILED_CHARS = 8000


class ProgressFile:
    """Rank 0's writer: `update` at each poll (the study-end notice's thread), `beat`
    every `REFRESH` s (a thread of its own); their writes are serialized. `wall`: the
    wall clock of ``written`` and ``alive`` (tests give a fake one)."""

    def __init__(
        self, rendezvous: Path, run_id: str | None, wall: Callable[[], float] = time.time
    ) -> None:
        self.path = Path(rendezvous) / PROGRESS_FILE
        self._run_id, self._wall = run_id, wall
        self._lock = threading.Lock()  # (two writers; one aside file name per process)
        self._state: dict[str, Any] | None = None  # the file as last written
        self._alive = -float("inf")  # (monotonic) ``alive`` last written
        self._said: tuple[Any, ...] | None = None  # what the file says, but for durations
        self._written = -float("inf")
        self._held_since: float | None = None  # (monotonic) rank 0 back-pressured since
        self._lifted = False  # the launcher's bound raised
        self._lifts = 0  # times raised (said at INFO the first time, then at DEBUG)
        self._starving: tuple[float, list[int]] = (-float("inf"), [])  # (read at, ranks)
        #: rank 0's training thread's reads, published once set (`Study`: its
        #: starvation watch's, whose clock is `update`'s `now`'s, monotonic)
        self.reads: ReadClock | None = None
        self._failed: str | None = None  # the launcher's error (`failed`)
        self._failing = False  # the last write failed (said once per streak: `_write`)

    def failed(self, launcher: Launcher, error: BaseException) -> bool:
        """The study failed for good with `error` (the launcher's, `Launcher.check`):
        write it at once, as ``failed`` (module docstring), beside the last counts; True
        if written. A failed write is said at WARNING (the other ranks then wait for
        their stall_timeout, as before), never raised."""
        self._failed = str(error)[:FAILED_CHARS]
        if self.update(launcher):
            return True
        logger.warning(
            "could not tell the other ranks in %s that the study failed: a rank that "
            "waits for a batch waits for its stall_timeout instead",
            self.path,
        )
        return False

    def update(self, launcher: Launcher, now: float | None = None) -> bool:
        """Write the file if what it says changed (module docstring); True if written.
        `now` is monotonic seconds (default: now). Never raises for a failed write
        (the readers then know less, and wait as they did without it)."""
        now = time.monotonic() if now is None else now
        held = launcher.data_backpressured()
        if not held:
            self._held_since = None
        elif self._held_since is None:
            self._held_since = now
        if now - self._starving[0] >= STARVING_READ:  # (a directory listing: not each poll)
            self._starving = (now, read_starving(self.path.parent, self._run_id))
        starving = self._starving[1]
        lifted = bool(starving) and held
        launcher.lift_data_bound(lifted)  # (before `held_by_data_bound`: the bound now)
        if lifted != self._lifted:
            self._lifted = lifted
            if lifted:
                self._lifts += 1
                logger.log(
                    logging.INFO if self._lifts == 1 else logging.DEBUG,
                    "%s while rank 0's receiver waits for room in its buffer: the "
                    "launcher lets up to 2 x job_limit ended simulations await their data, "
                    "so that more start and may feed them",
                    f"rank {starving[0]} starves"
                    if len(starving) == 1
                    else f"ranks {', '.join(map(str, starving))} starve",
                )
            else:
                logger.debug(
                    "the launcher's bound on ended simulations awaiting their data is "
                    "job_limit again (no rank starves, or rank 0 takes data in)"
                )
        by_bound, bound = launcher.held_by_data_bound()
        counts = launcher.summary()
        state: dict[str, Any] = {
            "run_id": self._run_id,
            "explained": launcher.silence_explained(),
            "jobs_alive": launcher.jobs_alive(),
            "running": int(counts.get("running", 0)),
            "pending": int(counts.get("pending", 0)),
            "exited": int(counts.get("exited", 0)),
            "finished": int(counts.get("finished", 0)),
            "starving": starving,
            "lifted": lifted,
            "held_by_bound": by_bound,
            "bound": bound,
            "failed": self._failed,
        }
        said = (*state.values(), held)
        # (rewritten while held, to carry its duration, and while the silence is
        # explained: a reader trusts an excuse only as fresh as `EXCUSE_AGE`)
        refresh = held or state["explained"] is not None
        if said == self._said and not (refresh and now - self._written >= REFRESH):
            return False
        held_for = None if self._held_since is None else round(now - self._held_since, 1)
        wall = self._wall()
        state.update(backpressured_for=held_for, written=wall, alive=wall)
        reads = self.reads  # (not in `said`: a read alone does not write the file)
        if reads is not None:
            state.update(reads.published(now), **reads.own_work(now))
        with self._lock:
            if not self._write(state):
                return False
            self._said, self._written, self._alive = said, now, now
        return True

    def beat(self, launcher: Launcher, now: float | None = None, period: float = REFRESH) -> bool:
        """Rewrite ``explained`` (`Launcher.silence_explained` now: an attribute read,
        never the launcher's lock) and ``alive`` in the file as last written, the rest
        unchanged (its counts as of its ``written``), when it is set and `period` s (the
        beats' period) have passed since the last ``alive`` (module docstring), or when
        it changed; True if written. Nothing before the first `update`, nor while no
        silence is explained (a withdrawn excuse is written once). `now`: monotonic
        seconds (default: now). Never raises for a failed write."""
        now = time.monotonic() if now is None else now
        with self._lock:
            last = self._state
            if last is None:
                return False
            explained = launcher.silence_explained()
            changed = explained != last.get("explained")
            if not changed and (explained is None or now - self._alive < period):
                return False
            if not self._write({**last, "explained": explained, "alive": self._wall()}):
                return False
            self._alive = now
            if changed:  # (the next `update` writes its counts too)
                self._said = None
        return True

    def _write(self, state: dict[str, Any]) -> bool:
        """Write `state` as the file (under `_lock`); False when that failed, said at
        WARNING with the error once per streak of failures (a write is tried again at
        the next poll or beat: a full rendezvous file system would say it at each)."""
        try:
            _write_renamed(self.path, json.dumps(state))
        except OSError as exc:
            if not self._failing:
                logger.warning(
                    "could not write %s (%s): until a write succeeds, the other ranks "
                    "have no word of rank 0's launcher (a silence it explains, a failed "
                    "study) and a rank that starves waits for its stall_timeout",
                    self.path,
                    exc,
                )
            self._failing = True
            return False
        self._failing = False
        self._state = state
        return True


def read_progress(rendezvous: Path, run_id: str | None) -> dict[str, Any] | None:
    """Rank 0's last word (module docstring), or None when not known: no file yet, an
    unreadable one, or another run's."""
    try:
        state = json.loads((Path(rendezvous) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("run_id") != run_id:
        return None
    return state


def _write_renamed(path: Path, text: str) -> None:
    """Write `text` to `path` aside (``.NAME.PID``), then rename it: a reader sees the
    old file or the new one, whole. On OSError the aside file is removed (not left in
    the rendezvous, one more per process that failed), and the error raised."""
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        aside.write_text(text)
        os.replace(aside, path)
    except OSError:
        with contextlib.suppress(OSError):  # (the first error is raised: it says what failed)
            aside.unlink(missing_ok=True)
        raise


def _starving_path(rendezvous: Path, rank: int) -> Path:
    return Path(rendezvous) / f"{STARVING_PREFIX}{rank}.json"


def report_starving(rendezvous: Path, run_id: str | None, rank: int, since: float) -> None:
    """Rank `rank` (not 0) waits for a batch with no sample since `since` (wall-clock
    seconds): tell rank 0 (module docstring). Written aside, then renamed; a failed
    write is not raised (rank 0 then lifts nothing, and the wait fails as before)."""
    said = json.dumps({"run_id": run_id, "rank": rank, "since": since})
    try:
        _write_renamed(_starving_path(rendezvous, rank), said)
    except OSError as exc:
        logger.warning("rank %d could not tell rank 0 that it starves (%r)", rank, exc)


def clear_starving(rendezvous: Path, rank: int) -> None:
    """The wait `report_starving` told of is over (a sample came, or a read)."""
    try:
        _starving_path(rendezvous, rank).unlink(missing_ok=True)
    except OSError as exc:  # (rank 0 then raises its bound for a while for nothing)
        logger.warning("rank %d could not withdraw its starvation report (%r)", rank, exc)


def read_starving(rendezvous: Path, run_id: str | None) -> list[int]:
    """The ranks whose report of this run says they starve (sorted); an unreadable
    report, or another run's, is not one."""
    ranks = []
    try:
        paths = list(Path(rendezvous).glob(f"{STARVING_PREFIX}*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            said = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(said, dict) and said.get("run_id") == run_id:
            rank = said.get("rank")
            if isinstance(rank, int) and not isinstance(rank, bool):
                ranks.append(rank)
    return sorted(ranks)
