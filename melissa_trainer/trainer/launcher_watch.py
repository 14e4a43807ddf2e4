"""A rank whose launcher dies before `OnlineTrainer.train()` watches it exits at once.

``accelerate launch`` with several processes (torch elastic, as ``torchrun``) starts
each rank in a session of its own (``start_new_session``), its parent the launcher
process itself (the elastic agent runs in it), so a ``kill -9`` of the launcher does
not reach the ranks. The launcher also hosts the rendezvous store (the agent's
``TCPStore``: ``TORCHELASTIC_USE_AGENT_STORE``), so a rank that was forming the process
group (``Accelerator()``) retries a store that is gone, in C++, until the group's
timeout (10 to 30 minutes by default), and a rank still in the user's code before its
trainer waits for nothing: left alone, both lived on for many minutes (a user trial's
``kill -9`` at 6-8 s of the start-up). `preemption`'s watch (a stop with a checkpoint)
starts only in `train()`.

So from the import of `melissa_trainer.trainer` (`arm`, before the trainer imports
torch), a rank under a launcher (`launcher_parent`) runs a daemon thread that checks
every `STARTUP_POLL` s that its parent is still that launcher. When it is not (init or
a subreaper adopted the rank), the thread writes one line on stderr (`said`) and exits
the process (`os._exit`, 143 as for a SIGTERM: nothing is trained yet, so nothing is
checkpointed, and the output directory's lock, an ``flock``, goes with the process).
A launcher that died before `arm` (during the rank's first imports: the trainer is
imported after torch) is seen there (`orphaned`: adopted by init, the launcher's store
refuses connections), with the same exit.

A thread, not ``PR_SET_PDEATHSIG``: it can say why it exits; a death signal would be a
SIGTERM that `train()`'s handler takes for a preemption by SIGTERM (or one more signal
to tell apart), it fires when the launcher's *thread* that forked the rank ends, not
the launcher, and it is Linux only. A thread needs the GIL, which torch's blocking
calls release: the store's connect does (test_launcher_gone_watch.py kills the parent
of a process blocked in it), and so does the rendezvous
(test_launcher_gone_at_start.py, one rank held before its trainer).

`train()` takes the watch over (`hand_over`, from `PreemptionHandler.install`): this
thread ends, and `preemption`'s own watches the same launcher (one owner at a time). A
launcher gone by then exits the rank at the hand-over, with the same line: `train()`
has trained nothing yet. Only the process that armed watches: a child forked from a
rank (a data loader's worker) neither watches nor hands over. A simulation started by
a rank never imports the trainer (`melissa_trainer.client` does not), so it is never
armed. A plain ``python train.py`` is never watched (`launcher_parent`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from melissa_trainer.trainer.stop_cause import StopCause, launcher_kind

__all__ = [
    "STARTUP_POLL",
    "StartupWatch",
    "arm",
    "armed",
    "hand_over",
    "launcher_parent",
    "leave",
    "orphaned",
    "said",
]

#: Seconds between two checks, before `train()`, that the launcher is alive.
STARTUP_POLL = 1.0
#: Seconds the exit waits for Python's buffered stdout and stderr to be flushed (the
#: main thread may hold a stream's lock, blocked in a write: the exit does not wait).
FLUSH_TIMEOUT = 1.0
#: Seconds `orphaned` waits for the launcher's store to answer.
PROBE_TIMEOUT = 2.0
#: The exit status of a rank whose launcher is gone before training (as a SIGTERM's).
EXIT_CODE = 128 + signal.SIGTERM


def launcher_parent() -> int | None:
    """The pid of the launcher whose death stops this process (its parent), when it runs
    under one: torch elastic's agent (``accelerate launch`` with several processes,
    torchrun: ``TORCHELASTIC_RUN_ID`` is in the environment it gives its workers), or
    ``accelerate launch``'s single-process launcher (the parent's command line, read
    from ``/proc``: `stop_cause.launcher_kind`); None otherwise, and when the parent is
    gone already (init's pid 1)."""
    parent = os.getppid()
    if parent <= 1:
        return None
    if os.environ.get("TORCHELASTIC_RUN_ID") is not None:
        return parent
    return parent if launcher_kind(parent) == "accelerate launch" else None


def said(cause: StopCause | None) -> str:
    """The line a rank writes when its launcher (`cause`) is gone before training:
    "the launcher (accelerate launch, pid N) is gone before training started: rank R
    exits; nothing to checkpoint" (R: the global rank, ``RANK``; 0 without one); "the
    launcher is gone..." when it died before the watch was armed (`cause` None: its pid
    is unknown then)."""
    rank = os.environ.get("RANK", "0")
    gone = "the launcher is gone" if cause is None else str(cause)
    return f"{gone} before training started: rank {rank} exits; nothing to checkpoint"


def orphaned() -> bool:
    """Whether this process is a torch elastic worker whose launcher died before `arm`
    (a kill during the rank's first imports): its parent is init (pid 1, which adopts
    orphans), and the launcher's store (``MASTER_ADDR:MASTER_PORT``, the agent's:
    ``TORCHELASTIC_USE_AGENT_STORE``) refuses connections. The store tells apart a
    launcher that is pid 1 itself (a container's entrypoint), whose store answers.
    False when it cannot tell (no agent store, an address that does not answer within
    `PROBE_TIMEOUT` s): then nothing is watched, as before."""
    if os.environ.get("TORCHELASTIC_RUN_ID") is None or os.getppid() != 1:
        return False
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return False
    try:
        address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
        with socket.create_connection(address, timeout=PROBE_TIMEOUT):
            return False  # (a store answers: the launcher lives)
    except ConnectionRefusedError:
        return True
    except (KeyError, ValueError, OSError):  # no address, or no answer: cannot tell
        return False


class StartupWatch:
    """Watches `parent` (this process's parent when made, the launcher) from a daemon
    thread until `hand_over`; when it is no longer the parent, `exit` s the process
    (module docstring).

    Args:
        parent: the launcher's pid.
        poll: see `STARTUP_POLL` (its value at construction by default).
        exit: how the process exits (`os._exit`; a test passes a recorder).
        fd: where the line goes (2: stderr, written with one ``os.write``, which takes
            no lock a blocked main thread could hold).
    """

    def __init__(
        self,
        parent: int,
        poll: float | None = None,
        exit: Callable[[int], Any] = os._exit,
        fd: int = 2,
    ) -> None:
        self.parent = parent
        self.poll = STARTUP_POLL if poll is None else float(poll)
        self.cause = StopCause.launcher_gone(parent)  # (while alive)
        self._exit, self._fd = exit, fd
        self._owner = os.getpid()
        self._lock = threading.Lock()  # one owner: the thread's exit or the hand-over
        self._done = threading.Event()
        name = "melissa-startup-watch"
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)

    def start(self) -> StartupWatch:
        """Start watching; returns self."""
        self._thread.start()
        return self

    @property
    def watching(self) -> bool:
        """True until the watch was handed over or acted."""
        return not self._done.is_set()

    def _gone(self) -> bool:
        return os.getppid() != self.parent

    def _watch(self) -> None:
        while not self._done.wait(self.poll):
            if self._gone():
                with self._lock:
                    if not self._done.is_set():  # (not handed over meanwhile)
                        self._done.set()
                        self._leave()
                return

    def hand_over(self) -> int | None:
        """End the watch and return the launcher's pid, for `train()`'s watch to go on
        with; None in a process other than the one that armed (a forked child), or when
        the watch ended already. A launcher gone by now exits the process here (the
        line said, `exit` called; a test's recorder returns, and so does this, None)."""
        if os.getpid() != self._owner:
            return None
        with self._lock:
            if self._done.is_set():
                return None
            self._done.set()
            if self._gone():
                self._leave()
                return None
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        return self.parent

    def _leave(self) -> None:
        leave(self.cause, self._exit, self._fd)


def leave(cause: StopCause | None, exit: Callable[[int], Any] = os._exit, fd: int = 2) -> None:
    """Say why (`said`, on `fd`), flush what Python buffered (bounded), `exit`."""
    with contextlib.suppress(OSError):  # (a reader gone with the launcher: nobody to tell)
        os.write(fd, f"{said(cause)}\n".encode())
    flusher = threading.Thread(target=_flush, name="melissa-startup-flush", daemon=True)
    flusher.start()
    flusher.join(FLUSH_TIMEOUT)
    exit(EXIT_CODE)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, None: nothing
            stream.flush()


_watch: StartupWatch | None = None
_arming = threading.Lock()


def arm() -> StartupWatch | None:
    """Start this process's start-up watch when it runs under a launcher
    (`launcher_parent`) and none was armed; idempotent; exit now, as the watch would,
    when the launcher is gone already (`orphaned`). Returns the watch (None: none,
    and in a child forked from a process that armed: it inherited no thread, and its
    parent is a rank, not a launcher)."""
    global _watch
    with _arming:
        if _watch is None:
            if orphaned():  # (the launcher died before this watch could see it)
                leave(None)
            parent = launcher_parent()
            _watch = None if parent is None else StartupWatch(parent).start()
        return _watch if _watch is not None and _watch._owner == os.getpid() else None


def armed() -> StartupWatch | None:
    """This process's start-up watch, while it watches; None otherwise."""
    watch = _watch
    if watch is None or watch._owner != os.getpid() or not watch.watching:
        return None
    return watch


def hand_over() -> StopCause | None:
    """`StartupWatch.hand_over` of this process's watch: the launcher's death as a stop's
    cause (its pid and kind, named while it lived), for `train()`'s watch; None when
    none watches (then `train()` asks `launcher_parent`)."""
    watch = armed()
    return None if watch is None or watch.hand_over() is None else watch.cause
