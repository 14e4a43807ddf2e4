"""Job leases: the trainer renews a file while it lives; a batch job whose lease stops
changing cancels itself.

A Slurm batch job belongs to Slurm, not to the trainer: if the trainer is SIGKILLed (or
its node dies) nobody cancels the job, which would run on and hold its allocation. So
each batch script starts a watchdog (`lease_lines`) that reads a lease file in the
script directory and cancels its own job once the content has not changed for the
lease timeout. `Lease` is what keeps changing it: a daemon thread rewrites every lease
file in place every `timeout` / 6 seconds with a counter and the time. It dies with the
process, which is the point.

The file is rewritten in place (not written aside and renamed) because on NFS a
reader's open revalidates an existing file's content (close-to-open consistency),
whereas a renamed file may be looked up through a stale cached name. A reader that
catches the file half-written sees a change, which only delays the timeout.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shlex
import threading
import time
from pathlib import Path

__all__ = ["DEFAULT_TIMEOUT", "MIN_TIMEOUT", "Lease", "check_lease_timeout", "lease_lines"]

logger = logging.getLogger(__name__)

#: the lease timeout of `SlurmBackend` by default, in seconds
DEFAULT_TIMEOUT = 300.0
#: the shortest lease timeout accepted, in seconds (a shorter one would cancel jobs
#: whenever the file system stalls for a moment)
MIN_TIMEOUT = 5.0


def check_lease_timeout(name: str, value: float | None) -> None:
    """Raise ValueError naming the option `name` unless `value` is None or a number of
    seconds >= MIN_TIMEOUT."""
    if value is not None and (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < MIN_TIMEOUT
    ):
        raise ValueError(
            f"{name} must be None or a number of seconds >= {MIN_TIMEOUT:g} (a few "
            f"minutes is usual), got {value!r}"
        )


class Lease:
    """Renews lease files from a daemon thread (see the module docstring).

    Thread-safety: `add` and `close` may be called from any thread. `add` writes the
    file once before it returns (so that a job submitted after it finds it) and starts
    the thread on first use. A write that fails is logged (once per streak of
    failures) and retried at the next renewal.

    Args:
        timeout: seconds without renewal after which a job's watchdog cancels it.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = float(timeout)
        self.interval = self.timeout / 6
        self._paths: set[Path] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._count = 0
        self._failing = False

    def add(self, path: Path) -> None:
        """Keep `path` renewed from now on (idempotent). Raises OSError if it cannot be
        written at all (its directory is not writable)."""
        if path in self._paths:  # the usual case; no wait on a renewal in progress
            return
        with self._lock:
            if path in self._paths:
                return
            self._write(path, check=True)
            self._paths.add(path)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, args=(self._stop,), name="melissa-slurm-lease", daemon=True
                )
                self._thread.start()

    @property
    def paths(self) -> list[Path]:
        """The files renewed (sorted)."""
        with self._lock:
            return sorted(self._paths)

    def close(self) -> None:
        """Stop renewing and remove the files (a job still running then cancels itself
        after the timeout). Idempotent; blocks until the thread has stopped. A later
        `add` starts afresh."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._lock:
            for path in self._paths:
                # (a file left behind stops changing all the same: its jobs cancel
                # themselves after the timeout, as after a removal; nothing to tell)
                with contextlib.suppress(OSError):
                    path.unlink()
            self._paths.clear()
            self._thread, self._stop = None, threading.Event()

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            with self._lock:
                for path in self._paths:
                    self._write(path)

    def _write(self, path: Path, check: bool = False) -> None:
        self._count += 1
        try:
            path.write_text(f"{self._count} {time.time():.3f}\n")
        except OSError as exc:
            if check:
                raise
            if not self._failing:
                logger.warning(
                    "cannot renew the job lease %s (%s): the Slurm jobs cancel themselves "
                    "after %.0f s without renewal",
                    path,
                    exc,
                    self.timeout,
                )
            self._failing = True
            return
        self._failing = False


def lease_lines(lease: str, timeout: float) -> list[str]:
    """Script lines that check the lease at the job's start, then start the lease
    watchdog in the background (its pid in ``$watchdog``).

    The trainer rewrites the file `lease` every `timeout` / 6 s (`Lease`). The
    watchdog reads it every `timeout` / 6 s and compares its content with what it read
    before: progress is a change, timed with the node's own clock (bash's ``SECONDS``),
    so that neither clock skew between nodes nor a file system's coarse or cached
    modification times matter. Once the content has not changed for `timeout` s, it
    writes why to the job's log and cancels the job (``scancel $SLURM_JOB_ID``: Slurm
    then ends every process of the job; ``kill -TERM 0`` where scancel fails). If the
    file cannot be read when the job starts (the script directory is not shared with
    the compute node), the watchdog says so in the log and stops: the job then runs as
    if it had no lease.

    The clock starts at the lease's last change, not at the job's start: a job that
    waited in the queue while its trainer died must not run a whole `timeout` more.
    Its age at the start is the file system's time (the modification time of a file
    the job creates beside it) minus the lease's modification time, so only the file
    system's clock counts (where it takes its clients' clocks, theirs must agree
    within a small part of `timeout`: NTP). Cached attributes (NFS) can make it look
    older, so the age only moves the clock forward so far that the watchdog still sees
    the content unchanged for two renewals (`timeout` / 3) itself before it cancels;
    and a lease older than `timeout` at the start is confirmed that way (its content
    unchanged for `timeout` / 3) before the job is cancelled, without its command
    ever starting (no exit code is written: the trainer, if any, counts it failed).
    """
    timeout_s = max(1, math.ceil(timeout))
    interval = max(0.2, timeout / 6)
    confirm = max(1, math.ceil(2 * interval))  # two renewals, seen unchanged
    head = max(0, timeout_s - confirm)  # the most the lease's age moves the clock on
    path = shlex.quote(lease)
    said = (
        f'"melissa-trainer: the trainer has not renewed the lease $lease for'
        f" {timeout_s} s (it was killed?): cancelling job $SLURM_JOB_ID"
    )
    return [
        f"lease={path}",
        "lease_age() {  # seconds since the lease last changed, by the file system's clock",
        "  local then now probe",
        '  then=$(stat -c %Y -- "$lease" 2>/dev/null) || { echo 0; return; }',
        '  probe=$(mktemp "${lease%/*}/.mt-clock.XXXXXX" 2>/dev/null) &&'
        ' now=$(stat -c %Y -- "$probe" 2>/dev/null); rm -f -- "$probe" 2>/dev/null',
        '  [ -n "$now" ] || now=$(date +%s)',
        "  echo $(( now > then ? now - then : 0 ))",
        "}",
        "age=$(lease_age)",
        f'if (( age >= {timeout_s} )) && seen=$(cat -- "$lease" 2>/dev/null); then',
        f"  sleep {confirm}  # (a cached modification time: the content must not change)",
        '  if [ "$(cat -- "$lease" 2>/dev/null)" = "$seen" ]; then',
        f'    echo {said} before its command starts (the lease is $age s old)" >&2',
        '    scancel "$SLURM_JOB_ID"',
        "    exit 1",
        "  fi",
        "  age=0",
        "fi",
        "(  # the lease watchdog: ends the job if the trainer stops renewing the lease",
        "  trap 'kill \"$nap\" 2>/dev/null; exit 0' TERM",
        '  seen=$(cat -- "$lease" 2>/dev/null) || {',
        '    echo "melissa-trainer: cannot read the lease $lease on $(hostname): this job'
        ' will not end by itself if the trainer dies" >&2; exit 0; }',
        f"  since=$(( SECONDS - (age < {head} ? age : {head}) ))",
        "  while :; do",
        f'    sleep {interval:.1f} & nap=$!; wait "$nap"',
        '    now=$(cat -- "$lease" 2>/dev/null)',
        '    if [ "$now" != "$seen" ]; then seen=$now; since=$SECONDS',
        f"    elif (( SECONDS - since >= {timeout_s} )); then",
        f'      echo {said}" >&2',
        '      scancel "$SLURM_JOB_ID" || kill -TERM 0',
        "      exit 0",
        "    fi",
        "  done",
        ") &",
        "watchdog=$!",
    ]
