"""The ranks' last meeting, after an end that every rank agreed on (a source's failure:
`source_failure`; a preemption: `ending.end_training`), before any of them exits.

Why. ``accelerate launch`` (torchrun) terminates the ranks still running, with SIGTERM,
as soon as one rank exits with a non-zero status (its agent looks every 0.1 s). After an
agreed failure or preemption every rank exits non-zero, but not at the same moment: the
ends differ per rank (rank 0's study stops its simulations; the ranks' lines are written
at different times). The first rank out made the agent signal the others while they
still worked: a rank still in `train()` logged "SIGTERM received: stopping at the next
stop synchronisation to write a checkpoint" (a second stop nobody asked for), one past it
was killed (exit -15 in place of its own 1 or 143).

So, once its end is done (the source stopped, the lines written), each rank meets the
others (`meet`): no rank exits while another still works. The meeting is bounded: a peer
that is gone breaks it at once (the backend's error, said at WARNING), one that does not
come within `MEET_TIMEOUT` s beyond the time the slowest rank's source may take to stop
(`meet_timeout`: a study's `kill_grace`; the largest of the ranks', agreed at the start
of training: `agree_meet_bound`) (hung, or stuck in its end) is left, with a WARNING; the
error being raised is the one that propagates, whatever the meeting says. Past the
meeting the ranks exit within moments of each other, still not at once: the agent's
SIGTERM may reach a rank as it exits (its interpreter's teardown). `hold_term` makes that
SIGTERM harmless for `TERM_GRACE` s: the rank is exiting already, with its own status.
"""

from __future__ import annotations

import atexit
import ctypes
import datetime
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

from melissa_trainer.core.wait_watch import WaitWatch

__all__ = [
    "MEET_TIMEOUT",
    "MEET_USUAL",
    "TERM_GRACE",
    "agree_meet_bound",
    "hold_term",
    "holding",
    "meet",
    "meet_timeout",
    "said_dropped",
]

logger = logging.getLogger(__name__)

#: seconds a rank waits at the meeting for the others (their ends: a study stopping its
#: simulations takes seconds, its `kill_grace` at most): then it exits without them
MEET_TIMEOUT = 120.0
#: the usual cause of a long wait at the meeting (`WaitWatch.waiting`'s `usual`)
MEET_USUAL = (
    "A rank still in its end (rank 0 stopping its simulations, a rank writing its lines "
    "or its checkpoint) is the usual cause"
)
#: seconds after the meeting during which a SIGTERM is the launcher's, sent because
#: another rank exited first: torchrun kills a rank that outlives it by 30 s with SIGKILL
TERM_GRACE = 30.0


def meet_timeout(source: Any) -> float:
    """The meeting's bound for ranks whose sources may take ``source.stop_bound()`` s
    to stop (`Source.stop_bound`: a study's `kill_grace`): `MEET_TIMEOUT` beyond it, so
    that a long grace does not make the others leave while rank 0 still kills its
    simulations (they exited, torchrun SIGTERMed rank 0 in its stop, then SIGKILLed it).
    Never raises: it runs in the trainer's ``finally``, where an error would hide the
    run's own and skip its clean-up; a `stop_bound` that fails or is no finite number
    (a user's override) is said at WARNING and counts 0."""
    try:
        bound = float(source.stop_bound())
    except Exception as exc:  # (a user's override: said, not raised over the run's end)
        logger.warning("%s.stop_bound() failed (%r): the ranks' last meeting waits "
                       "%g s", type(source).__name__, exc, MEET_TIMEOUT)  # fmt: skip
        return MEET_TIMEOUT
    if not math.isfinite(bound):
        logger.warning("%s.stop_bound() gave %r, not a number of seconds: the ranks' "
                       "last meeting waits %g s", type(source).__name__, bound,
                       MEET_TIMEOUT)  # fmt: skip
        return MEET_TIMEOUT
    return MEET_TIMEOUT + max(0.0, bound)


def agree_meet_bound(rank: int, source: Any, device: Any) -> float | None:
    """The meeting's bound, the same on every rank: the largest of the ranks'
    `meet_timeout(source)`, by one all-reduce (MAX) on `device`, which is also the
    barrier of the start of training (`run_waits.sources_started`: no collective is
    added). Each rank's own bound would let a rank whose source says less (a script with
    a smaller `kill_grace` there, another source) leave while rank 0 still stops its
    simulations: torchrun then SIGTERMs rank 0 in its stop. None without a process
    group of two ranks or more (no meeting).

    Raises:
        ConfigError: the bound exceeds the process group's timeout, on every rank (rank
            0's is said, the others' are quiet copies: `common.refusal.elsewhere`; a
            refusal to start: `refusals_end_the_program` says it as one line): a
            rank waiting at the meeting for a late rank 0 would be ended by the backend
            (gloo's monitored barrier bounds rank 0's wait only, the others wait for
            its answer as long as the group's timeout; NCCL aborts a collective past
            it), so it is refused before any step, naming what to change.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    shared = torch.tensor([meet_timeout(source)], dtype=torch.float64, device=device)
    dist.all_reduce(shared, op=dist.ReduceOp.MAX)
    bound = float(shared.item())
    group = group_timeout(device)
    if group is not None and bound > group:
        from melissa_trainer.common.refusal import elsewhere
        from melissa_trainer.config.reading import ConfigError

        # (a ConfigError, a refusal to start: a plain ValueError was no refusal, so
        # `refusals_end_the_program` let it out as a traceback through the trainer)
        raise elsewhere(ConfigError(_past_group(bound, group)), rank)
    return bound


def group_timeout(device: Any) -> float | None:
    """The default process group's timeout, in seconds, as its backend on `device` holds
    it (what ``InitProcessGroupKwargs(timeout=...)`` set, else torch's default for the
    backend); None when torch keeps it elsewhere (said at WARNING: the meeting's bound
    is then not checked against it)."""
    try:
        # (torch has no public getter of a group's timeout: its backend's options hold it)
        backend = dist.group.WORLD._get_backend(torch.device(device))  # type: ignore[union-attr]
        return float(backend.options._timeout.total_seconds())
    except Exception as exc:  # (torch's private API: another version may differ)
        logger.warning("the process group's timeout could not be read (%r): the ranks' "
                       "last meeting's bound is not checked against it", exc)  # fmt: skip
        return None


def _past_group(bound: float, group: float) -> str:
    """The refusal's words: a meeting's `bound` past the process group's timeout."""
    wide = math.ceil(bound) + 60
    return (
        f"the ranks' last meeting may wait {bound:g} s ({MEET_TIMEOUT:g} s beyond the "
        f"longest stop_bound() of the ranks' sources: a Study's STOP_WAIT, FINAL_WAIT and its "
        f"LauncherTuning.kill_grace, with its backend's waits), more than the process "
        f"group's timeout, {group:g} s: a rank waiting there while rank 0 stops its "
        f"source would be ended by the backend. Lower LauncherTuning.kill_grace, or give "
        f"the trainer kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds="
        f"{wide}))] (accelerate.utils)"
    )


def meet(rank: int, why: str, timeout: float = MEET_TIMEOUT, device: Any = None) -> bool:
    """Wait (at most `timeout` s) until every rank has called this, after the end `why`
    (words for the warnings: "a source's failure", "a preemption"); True when all came.
    A no-op (True) without a process group. Never raises: a peer gone or late is said at
    WARNING and this returns False. gloo: a monitored barrier (no work is left queued on
    the group, so the exit's teardown waits for nothing); another backend: a barrier
    whose completion is polled until `timeout` (left in flight when late). `device`: the
    barrier's device off gloo (the current CUDA device by default)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return True
    ends = f"The meeting ends at {timeout:g} s: this rank then exits without them"
    watch = WaitWatch(rank, first=min(60.0, timeout / 2), ends=ends)
    what = f"the other ranks at the end of training after {why} (their last meeting)"
    try:
        with watch.waiting(what, usual=MEET_USUAL):
            if dist.get_backend() == "gloo":
                dist.monitored_barrier(timeout=datetime.timedelta(seconds=timeout))
                return True
            return _polled_barrier(timeout, device)
    except Exception as exc:  # (a peer gone: the backend's error; a late one: the timeout's)
        logger.warning(
            "rank %d did not meet every other rank at the end of training after %s "
            "(a rank is gone or late: %s); it exits without them",
            rank,
            why,
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
        )
        return False


def _polled_barrier(timeout: float, device: Any) -> bool:
    """An asynchronous all-reduce of one number, waited for by polling until `timeout`;
    raises TimeoutError when it is not complete by then."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    work = dist.all_reduce(torch.zeros(1, device=device), async_op=True)
    deadline = time.monotonic() + timeout
    while not work.is_completed():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not every rank came within {timeout:g} s")
        time.sleep(0.01)
    work.wait()  # (raises the collective's error, if it failed)
    return True


_FOUND: Any = object()  # (`hold_term`'s `previous` default: the handler found)


def hold_term(
    grace: float = TERM_GRACE,
    clock: Callable[[], float] = time.monotonic,
    previous: Any = _FOUND,
) -> bool:
    """For `grace` s from now, a SIGTERM is taken for the launcher's, sent as another
    rank exited first (module docstring): dropped, since this rank is exiting already
    with its own status. After that, SIGTERM does what it did before (the handler found
    here runs; the default one ends the process). Only under torchrun (a
    ``TORCHELASTIC_RUN_ID`` in the environment: its agent is the sender) and in the main
    thread (where Python installs handlers); returns whether it held. Idempotent while
    a hold is in place (`holding`). `previous`: the handler SIGTERM gets back after the
    grace, when not the one found (the trainer's: installed before `PreemptionHandler`'s,
    whose `restore` then leaves SIGTERM to the hold).

    At exit within the grace (`atexit`: the first handler to run), SIGTERM is ignored
    at the C level until the grace ends: the interpreter's finalization, after the
    `atexit` handlers, puts back the default handler of a signal that a Python function
    handles (CPython's ``_PySignal_Fini``), and a SIGTERM there ended the rank (-15),
    while it leaves an ignored one ignored. A daemon thread puts the default back at the
    grace's end (a teardown that outlasts the grace ends on SIGTERM again); once the
    finalization has begun no Python thread runs, so a C teardown begun within the grace
    (a process group's) that hangs past it is ended by torchrun's SIGKILL, 30 s after
    its SIGTERM. A SIGTERM dropped before exit is said once at the next `said_dropped`
    (a handler must not log: it may interrupt a log record's write): at exit, or at a
    new hold."""
    global _held
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    if holding():
        return True
    said_dropped()
    until = clock() + grace
    if previous is _FOUND:
        previous = signal.getsignal(signal.SIGTERM)

    def late(signum: int, frame: FrameType | None) -> None:
        if clock() < until:
            _dropped[0] += 1
            return  # (no logging here: a handler may interrupt a log record's write)
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous in (signal.SIG_DFL, None):
            os.kill(os.getpid(), signal.SIGTERM)

    def exiting() -> None:  # (at exit, within the grace: ignored until its end only)
        said_dropped()
        left = until - clock()
        if left > 0 and signal.getsignal(signal.SIGTERM) is late:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            threading.Thread(
                target=_release, args=(left,), name="melissa-term-hold", daemon=True
            ).start()

    signal.signal(signal.SIGTERM, late)
    _held = late
    atexit.register(exiting)  # (registered last: the first to run at exit)
    return True


def holding() -> bool:
    """Whether a `hold_term` hold is SIGTERM's handler now (`PreemptionHandler.restore`
    leaves SIGTERM to it)."""
    return _held is not None and signal.getsignal(signal.SIGTERM) is _held


def said_dropped() -> None:
    """Say (at WARNING) that SIGTERMs were dropped by the hold, if any were since the
    last call (at exit, and at a new hold); never from a signal handler."""
    count, _dropped[0] = _dropped[0], 0
    if count:
        logger.warning(
            "%d SIGTERM(s) ignored after the end of training (taken for the launcher's, "
            "sent as another rank exited first: `exit_meeting.hold_term`)",
            count,
        )


_held: Callable[[int, FrameType | None], None] | None = None
_dropped = [0]  # SIGTERMs dropped by a hold since the last `said_dropped`


def _release(left: float) -> None:
    """At the grace's end, SIGTERM's default action again (C level: the main thread may
    be in a teardown; Python's `signal.signal` is for the main thread only)."""
    time.sleep(left)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.signal(int(signal.SIGTERM), 0)  # (SIG_DFL)
