"""Preemption: SIGTERM and SIGINT end training cleanly, with a checkpoint.

A scheduler stops a job with SIGTERM (Slurm: before a preemption, at ``--signal``'s
lead time, at the time limit, on ``scancel``; Kubernetes and systemd alike), a user
with Ctrl-C (SIGINT). While `OnlineTrainer.train()` runs, `PreemptionHandler` turns
either into a request that the trainer honours at its next stop synchronisation (under
several ranks, the one whose agreement starts after the signal: a window later): every
rank stops at the same step, writes a checkpoint, stops the simulations, fires the end
hooks, and `train()` raises `Preempted` (exit code 128 + the signal number).

A second signal exits at once: the simulations are killed (within `FORCE_STOP_TIMEOUT`
s) and the process exits with 128 + that signal's number, without a checkpoint (the
previous one stays the latest). A repeat that comes less than `REPEAT_WINDOW` s after
the first signal is taken for the same request, not a second one: Slurm signals every
process of a job step, and ``accelerate launch`` (torchrun) forwards the signal it gets
to its ranks as well, so one stop often reaches a rank twice at once.

**A rank whose launcher died stops with a checkpoint.** `accelerate launch` with several
processes (torch elastic, as torchrun) starts each rank in a session of its own, so a
``kill -9`` of the launcher (or of its process group) does not reach the ranks, which
would train on, holding the output directory and their simulations. While `train()` runs
under such a launcher (``TORCHELASTIC_RUN_ID`` in the rank's environment, or a parent
whose command line is ``accelerate launch``), a thread checks every `PARENT_POLL` s that
the parent is still the one it started with (``os.getppid()``: an orphan is adopted by
init or a subreaper); when it is not, the rank asks to stop: every rank stops at the next
stop synchronisation, writes a checkpoint, stops its simulations, releases the output
directory and exits (`Preempted`, 143). The cause travels with the request (`StopCause`,
whose `code` the ranks agree on): every rank says "the launcher (accelerate launch, pid
N) is gone", not a SIGTERM nobody sent. A rank still alive `ORPHAN_GRACE` s (10 minutes)
after its launcher died (a collective that hangs) exits as a second signal makes it:
simulations killed, no checkpoint. A plain ``python train.py`` is never watched: its
parent is a shell, which may go (``nohup``) without the training going with it. Before
`train()`, from the import of `melissa_trainer.trainer`, `launcher_watch` watches the
same launcher and exits the rank at once (nothing trained, nothing to checkpoint);
`install` takes the watch over from it (`launcher_watch.hand_over`).

How it works: the handler is installed in the main thread (Python runs signal handlers
there only). Its Python-level handler does nothing; the signal's number reaches a
watcher thread through `signal.set_wakeup_fd`, which Python's C-level handler writes
at once, even while the main thread is blocked in a collective or a long kernel. So
the request is visible to any thread (the data wait loop looks at it), and the second
signal works even when the main thread cannot run Python code. The Python-level handler
also notes the first signal's number (one assignment: nothing that could deadlock in a
handler): the watcher thread needs the GIL, which a training loop of small steps hands
over only every switch interval (5 ms, tens of steps), so without it a signal sent while
the main thread runs Python was seen some steps late, at no fixed step.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from melissa_trainer.trainer.late_end import EndCheckpoint

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.trainer.launcher_watch import launcher_parent as launcher_parent
from melissa_trainer.trainer.parent_watch import start_watch
from melissa_trainer.trainer.preempted import Preempted as Preempted
from melissa_trainer.trainer.preempted import exit_code
from melissa_trainer.trainer.stop_cause import StopCause, launcher_node
from melissa_trainer.trainer.term_words import late_words, stop_requested_words

__all__ = [
    "FORCE_STOP_TIMEOUT",
    "ORPHAN_GRACE",
    "PARENT_POLL",
    "REPEAT_WINDOW",
    "PreemptionHandler",
]

logger = logging.getLogger(__name__)

#: Seconds after the first signal during which a repeat is the same request (see above):
#: a forwarded duplicate comes within milliseconds, but a rank's launcher on a loaded node
#: may be scheduled late, and a copy taken for a second signal exits without the
#: checkpoint; a person's second Ctrl-C too soon is told so (at WARNING), and when.
REPEAT_WINDOW = 2.0
#: Seconds a second signal gives `on_force` (killing the simulations) before exiting.
FORCE_STOP_TIMEOUT = 5.0
#: The signals that preempt training.
SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Seconds between two checks that the launcher that started this rank is alive.
PARENT_POLL = 1.0
#: Seconds a rank whose launcher died has to stop with a checkpoint before it exits
#: without one (its simulations killed), as a second signal makes it.
ORPHAN_GRACE = 600.0


class PreemptionHandler:
    """Catches `signals` between `install()` and `restore()` (or as a context manager).

    Args:
        on_force: called when a second signal forces the exit (kill the simulations:
            the trainer passes `source.stop`); run in a thread of its own and given up
            to `FORCE_STOP_TIMEOUT` s. None: nothing.
        signals: the signals to catch (SIGTERM and SIGINT).
        repeat_window: see `REPEAT_WINDOW` (its value at construction by default).
        exit: how the forced exit happens (`os._exit`; a test passes a recorder).
        parent: the launcher whose death requests a stop (module docstring): its pid,
            which must be this process's parent; ``"auto"`` (default):
            `launcher_parent()` at `install`; None: none watched.
        parent_poll: see `PARENT_POLL` (its value at construction by default).
        orphan_grace: see `ORPHAN_GRACE` (its value at construction by default).

    `signum`, `cause`, `code` and `requested` may be read from any thread at any time.
    `install` and `restore` are called from the thread that trains; outside the main
    thread (where Python cannot install handlers) the signals keep their previous
    disposition, with a warning (the launcher is watched all the same). `restore` puts
    back the previous handlers and wakeup fd and stops watching the launcher; it is
    idempotent. Not reentrant: install once.
    """

    def __init__(
        self,
        on_force: Callable[[], Any] | None = None,
        signals: Iterable[signal.Signals] = SIGNALS,
        repeat_window: float | None = None,
        exit: Callable[[int], Any] = os._exit,
        parent: int | str | None = "auto",
        parent_poll: float | None = None,
        orphan_grace: float | None = None,
    ) -> None:
        self.on_force = on_force
        self.signals = tuple(signals)
        self.repeat_window = REPEAT_WINDOW if repeat_window is None else float(repeat_window)
        self._exit = exit
        self._parent = parent
        self.parent_poll = PARENT_POLL if parent_poll is None else float(parent_poll)
        self.orphan_grace = ORPHAN_GRACE if orphan_grace is None else float(orphan_grace)
        self._watching: threading.Thread | None = None
        self._unwatch = threading.Event()
        self._request_lock = threading.Lock()  # (the signal watcher and the parent's)
        #: why training was asked to stop ("" until it is): `str(cause)`
        self.reason = ""
        self._node = launcher_node()  # (a signal's cause names its node: stop_cause)
        #: the trainer's checkpoint folder: a first signal names the latest to resume from
        self.checkpoints: Path | None = None
        #: what a late signal's line says of the end's checkpoint: decided by the end,
        #: alike on every rank (`late_end`: said then if the line came before)
        self.end = EndCheckpoint()
        self._signum = 0
        self._cause: StopCause | None = None
        #: the first signal as the main thread's Python-level handler noted it (0: none),
        #: before the watcher thread records it in `_signum` (module docstring)
        self._noted = 0
        self._first_at = 0.0
        self._previous: dict[signal.Signals, Any] = {}
        self._restored: dict[int, Any] = {}  # (what `restore` put back, by signal)
        self._previous_fd = -1
        self._reader: socket.socket | None = None
        self._writer: socket.socket | None = None
        self._thread: threading.Thread | None = None
        #: set once training has ended (the ranks' last meeting: `exit_meeting`), the
        #: end's words ("a preemption"): a first signal then says the rank is exiting
        self.ending = ""
        #: set once the loop has ended normally (`finish`): a first signal then stops
        #: nothing; it is said, and sent again once `train()` is done (`deliver_late`)
        self.finished = False
        self._late = 0  # (that signal: 0 none)

    def previous_term(self) -> Any:
        """SIGTERM's handler before `install` (what `restore` puts back; None: one not
        installed from Python), for a handler installed over this one (`hold_term`)."""
        return self._previous.get(signal.SIGTERM, signal.getsignal(signal.SIGTERM))

    @property
    def signum(self) -> int:
        """The first signal caught (0: none yet)."""
        return self._signum or self._noted

    @property
    def cause(self) -> StopCause | None:
        """Why the first stop request came (a signal, the launcher's death); None: none."""
        return self._cause or (StopCause(self._noted, node=self._node) if self._noted else None)

    @property
    def code(self) -> int:
        """`cause` as the ranks agree on it (`StopCause.code`; 0: none yet): what the
        trainer's stop synchronisation carries to every rank."""
        return cause.code if (cause := self.cause) is not None else 0

    def requested(self) -> bool:
        """True once a signal was caught: training should stop at the next chance. In
        the main thread, true from the first bytecode after the signal's delivery."""
        return self._signum != 0 or self._noted != 0

    def _note(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler (main thread): note the first signal; the watcher
        thread does the rest (logging, a second signal's forced exit)."""
        if not self._noted:
            self._noted = signum

    def __enter__(self) -> PreemptionHandler:
        return self.install()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.restore()

    def install(self) -> PreemptionHandler:
        """Catch the signals from now on (main thread only); returns self."""
        if self._writer is not None or self._watching is not None:
            raise RuntimeError("PreemptionHandler.install() was called twice")
        self._watching = start_watch(
            self._parent,
            poll=self.parent_poll,
            grace=self.orphan_grace,
            unwatch=self._unwatch,
            request=self._first_request,
            force_exit=self._force_exit,
        )
        if threading.current_thread() is not threading.main_thread():
            logger.warning(
                "train() runs outside the main thread: SIGTERM/SIGINT keep their handlers "
                "and will not write a checkpoint"
            )
            return self
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)  # set_wakeup_fd requires it
        self._thread = threading.Thread(target=self._watch, name="melissa-preemption", daemon=True)
        self._thread.start()
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._note)
        return self

    def restore(self) -> None:
        """Give the signals back their previous handlers, stop watching the launcher;
        idempotent."""
        if self._watching is not None:
            self._unwatch.set()
            if self._watching is not threading.current_thread():
                self._watching.join()
            self._watching = None
        if self._writer is None:
            return
        for sig, previous in self._previous.items():
            if signal.getsignal(sig) != self._note:
                continue  # (a handler installed over ours since, `hold_term`'s: it stays)
            # None: a handler not installed from Python; the default is the closest
            self._restored[sig] = signal.SIG_DFL if previous is None else previous
            signal.signal(sig, self._restored[sig])  # (recorded first: `_on_signal`)
        self._previous.clear()
        signal.set_wakeup_fd(self._previous_fd)
        # a signal that came just before the handlers were restored is still handled
        self._writer.close()  # the watcher reads what is left, then EOF, and ends
        if self._thread is not None:
            self._thread.join()
        assert self._reader is not None
        self._reader.close()
        self._reader = self._writer = self._thread = None

    def deliver_late(self) -> None:
        """After `restore` (`train()`'s last act, after a normal end): raise the signal
        received after the end of training (`finished`) again, for its previous handler
        (the default ends the process, 128 + the signal, as after `train()` returned).
        Dropped, a scheduler's SIGTERM (time limit, ``scancel``) was swallowed: the
        script ran on and the job ended 0 (saying "stopping at the next stop
        synchronisation to write a checkpoint", where none came)."""
        late, self._late = self._late, 0
        if late and self._writer is None:
            signal.raise_signal(late)

    def _watch(self) -> None:
        assert self._reader is not None
        while True:
            try:
                data = self._reader.recv(64)
            except OSError:  # closed under us
                return
            if not data:
                return
            for signum in data:
                # the wakeup fd gets every signal with a Python handler (SIGALRM of a
                # timer, SIGCHLD...): only ours preempt
                if signum in self.signals:
                    self._on_signal(signum)

    def _first_request(self, cause: StopCause, late: bool = False) -> bool:
        """Record the first stop request (True), or say that one came before (False);
        `late`: a signal's, kept for `deliver_late` when the loop had ended (`finish`)."""
        with self._request_lock:
            if self._signum:
                return False
            self._cause, self.reason = cause, str(cause)
            self._signum, self._first_at = cause.signum, time.monotonic()
            if late and self.finished:  # (under the lock: `finish` converts the others)
                self._late = cause.signum
            return True

    def finish(self, signum: int) -> None:
        """The loop has ended; `signum`: the stop the ranks agreed on (0: none). Without
        one, a first signal from now stops nothing (`finished`: said, then sent again by
        `deliver_late`), and so does one this rank caught in the last window, after the
        last stop synchronisation, which no rank could agree on any more: said again
        (its first line promised a stop to come), not swallowed (the script ran on to
        exit 0, with no checkpoint when `save_at_end` was off; a launcher's death, no
        signal, stays as it was)."""
        with self._request_lock:
            self.finished = not signum
            cause = self._cause
            if not self.finished or self._late or cause is None or cause.launcher:
                return
            self._late = cause.signum
        status = exit_code(cause.signum)
        logger.warning(late_words(str(cause), status, self.end.clause(str(cause)), after_sync=True))

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        # the wakeup fd hears every handler's: a hold's (`hold_term`) is no request; one
        # read after `restore` came before it (the fd goes back after the handlers): ours
        if signal.getsignal(signum) not in (self._note, self._restored.get(signum, self._note)):
            return
        if self.ending:
            if self._first_request(StopCause(signum, node=self._node)):
                logger.warning(
                    "%s received after the end of training (%s): this rank is exiting, "
                    "once the other ranks have met it (their last meeting); send it again, "
                    "%g s or more from now, to exit at once",
                    name,
                    self.ending,
                    self.repeat_window,
                )
                return
        elif self._first_request(StopCause(signum, node=self._node), late=True):
            if self._late:  # (the loop had ended: `finish`)
                words = late_words(name, exit_code(signum), self.end.clause(name), after_sync=False)
                logger.warning(words)
            else:
                logger.warning(stop_requested_words(name, self.repeat_window, self.checkpoints))
            return
        elapsed = time.monotonic() - self._first_at
        if elapsed < self.repeat_window:
            # (a warning: a user's quick second Ctrl-C lands here, and must learn why)
            logger.warning(
                "%s again %.1f s after the first: taken for the same stop request (a signal "
                "a launcher forwards reaches a rank twice within %g s); send it again %g s "
                "or more after the first to exit at once, without a checkpoint",
                name, elapsed, self.repeat_window, self.repeat_window,
            )  # fmt: skip
            return
        logger.critical("%s again: exiting now, without a checkpoint", name)
        self._force_exit(signum)

    def _force_exit(self, signum: int) -> None:
        """Kill the simulations (`on_force`, up to `FORCE_STOP_TIMEOUT` s), exit."""
        if self.on_force is not None:
            helper = threading.Thread(target=self._force, name="melissa-force-stop", daemon=True)
            helper.start()
            helper.join(FORCE_STOP_TIMEOUT)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # closed or broken: nothing to save
                stream.flush()
        self._exit(exit_code(signum))

    def _force(self) -> None:
        assert self.on_force is not None
        try:
            self.on_force()
        except BaseException:  # exiting anyway: say why the kill may be incomplete
            logger.exception("stopping the simulations before the forced exit failed")
