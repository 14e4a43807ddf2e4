"""`LauncherThread`: the supervisor's thread of a `Launcher`, a base class of `Launcher`.

Its loop (`_run`: the supervisor's ticks until the study is complete, stopped or
failed), the failure it reports (`check`) and its end (`stop`: every job killed, the
thread joined). The loop alone starts, polls and kills jobs, through the supervisor;
`check` and `stop` may be called from any thread. Whatever ends the loop, the jobs are
killed (`Supervisor.shutdown`) and the first error is kept for `check`.

`launcher.Launcher` sets the attributes declared here and its `start` starts the thread.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from melissa_trainer.launcher.launcher_record import LauncherRecord
from melissa_trainer.launcher.reports import LauncherError

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.launcher.job_logs import LogDirHold
    from melissa_trainer.launcher.tuning import LauncherTuning

__all__ = ["LauncherThread"]

logger = logging.getLogger("melissa_trainer.launcher")


class LauncherThread(LauncherRecord):
    """The supervisor's thread, run, checked and stopped (see the module docstring);
    `Launcher` sets the attributes declared here."""

    #: the failure policy and timing (`Launcher`'s `tuning`)
    tuning: LauncherTuning
    #: set by `stop`: the loop ends at its next wait
    _stop: threading.Event
    #: the log folder's hold, from `start` to `stop` (`job_logs.LogDirHold`)
    _log_hold: LogDirHold | None

    def stop(self, wait: float = 0.0, before_kill: Callable[[], None] | None = None) -> None:
        """Kill every job (no orphans) and join the thread. Idempotent; any thread.

        With `wait`, first give the running jobs up to that many seconds to end by
        themselves and the exited ones' data to arrive (when the stream is over, they
        are closing: their exit is then recorded as it is). `before_kill` is called
        after that wait, before any job is killed (`Study.stop` tells its receiver, so
        that what it kills is not taken for simulations that died). Blocks until the
        jobs are gone: up to `kill_grace` s for them all (`Backend.kill_all`)."""
        thread = self._thread
        deadline = time.monotonic() + wait
        while (
            thread is not None
            and thread.is_alive()
            and self._error is None
            and _still_closing(self.summary())
            and time.monotonic() < deadline
        ):
            time.sleep(min(self.tuning.poll_interval, 0.05))
        if before_kill is not None:
            before_kill()
        self._stopped = True
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._lock:  # the losses reported since the last draw: the sampler's state
            self._study.apply_observations()
            self._study.close_draw_log()  # (every row flushed already; a later stop writes none)
        if self._log_hold is not None:
            self._log_hold.release()
        atexit.unregister(self.stop)

    def check(self) -> None:
        """Raise `LauncherError` if the study failed or the launcher's thread died. Cheap."""
        error = self._error
        if error is None:
            return
        if isinstance(error, LauncherError):
            raise LauncherError(str(error)) from error.__cause__
        raise LauncherError(f"the launcher's thread failed: {error!r}") from error

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        supervisor = self._supervisor
        assert supervisor is not None
        why = "the study stops: the trainer stopped it"  # (its jobs' logs say why they died)
        try:
            while not self._stop.is_set():
                supervisor.tick()
                if supervisor.finished():
                    logger.info("launcher: study complete %s", self.summary())
                    break
                supervisor.wait(self._stop)
        except BaseException as exc:
            if isinstance(exc, LauncherError):  # its report is raised by check(): once
                headline = str(exc).partition("\n")[0]
                logger.error("launcher: %s (the report: Launcher.check())", headline)
                why = f"the study failed: {headline}"
            else:  # a bug, not the study's failure: its traceback, which no other output
                # carries (`Study` raises its `LauncherError` from None)
                logger.error("launcher: %r", exc, exc_info=exc)
                why = f"the launcher failed: {exc!r}"
            with self._lock:
                self._error = exc
        finally:
            try:
                supervisor.shutdown(why)
            except BaseException as exc:  # an error while killing: report it, keep the first
                logger.exception("launcher: stopping the jobs failed")
                with self._lock:
                    self._error = self._error or exc


def _still_closing(summary: Mapping[str, float]) -> bool:
    """Jobs alive, or exited with their data still due."""
    return summary["running"] + summary["exited"] > 0
