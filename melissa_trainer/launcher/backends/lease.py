"""The trainer's side of a job lease: files rewritten every few seconds while it lives.

A Slurm batch job belongs to Slurm, not to the trainer: if the trainer is SIGKILLed (or
its node dies) nobody cancels the job, which would run on and hold its allocation. So
each batch script starts a watchdog (`slurm_script.lease_lines`) that reads a lease
file in the script directory and cancels its own job once the content has not changed
for the lease timeout. `Lease` is what keeps changing it: a daemon thread rewrites
every lease file in place every `timeout` / 6 seconds with a counter and the time. It
dies with the process, which is the point.

The file is rewritten in place (not written aside and renamed) because on NFS a
reader's open revalidates an existing file's content (close-to-open consistency),
whereas a renamed file may be looked up through a stale cached name. A reader that
catches the file half-written sees a change, which only delays the timeout.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from pathlib import Path

__all__ = ["Lease"]

logger = logging.getLogger(__name__)


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
        with self._lock:
            if path in self._paths:
                return
            self._write(path, check=True)
            self._paths.add(path)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="melissa-slurm-lease", daemon=True
                )
                self._thread.start()

    @property
    def paths(self) -> list[Path]:
        """The files renewed (sorted)."""
        with self._lock:
            return sorted(self._paths)

    def close(self) -> None:
        """Stop renewing and remove the files (a job still running then cancels itself
        after the timeout). Idempotent; blocks until the thread has stopped."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._lock:
            for path in self._paths:
                with contextlib.suppress(OSError):
                    path.unlink()
            self._paths.clear()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
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
