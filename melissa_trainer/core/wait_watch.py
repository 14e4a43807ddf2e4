"""`WaitWatch`: a rank that waits long in a collective says so, instead of hanging silent.

A collective returns only once every rank has reached it. A rank stopped (SIGSTOP, a
debugger), hung, or busy for long elsewhere (a long save or load) holds the others in
it until the process group's timeout (torch's default: 30 minutes; users may pass
``InitProcessGroupKwargs(timeout=...)``), with nothing in the log. Wrapped in
`WaitWatch.waiting`, a wait that lasts more than `first` seconds logs a warning naming
what it waits for and what to check, again at twice that, four times..., and one line
when it ends after a warning. The watch only observes: the wait, its result and the
collectives run are the same with it.

Each wait names its collective and its usual cause (`waiting`'s `what` and `usual`): the
stop agreement's is a rank still waiting for its data (`AGREEMENT_USUAL`), a checkpoint's
a rank still writing or reading its files (`CHECKPOINT_USUAL`), a log's and the other
collectives among a window's steps a rank still waiting for its data or running its steps
(`STEPS_USUAL`), a validation's a rank still evaluating (`EVAL_USUAL`); a run's start and
end have theirs (`LOCK_USUAL`, `SOURCES_USUAL`, `RESUME_GATHER_USUAL`, `LAST_STEPS_USUAL`,
`UNTRAINED_USUAL`; these words are in `core.wait_words`). Which rank is late is
told by the collective: every waiting rank warns, so the late ones are those that do
not, and the warning says how to find them; with a `RollCall` (`WaitWatch.roll`: the
launcher's store, `trainer.roll_call`) it names them. Each rank's watcher thread
publishes the number of the wait it sees in progress (this rank's count of waits: the
same sequence on every rank, the collectives being run in lockstep), and a warning names
the ranks whose number is behind: not seen at this wait ("likely": one that arrived
within the last look has not published yet). The training thread never talks to it.
One watch serves every watched collective of a trainer (`StopSync.watch`, also used by
`trainer.rank_reports` for a checkpoint's, `trainer.reporting`, the hooks'): set its
`first` there, for every wait at once. A wait is watched on every rank or on none (the
numbers must match): callers watch a collective only when it runs on every rank.

A span of steps (`WaitWatch.stepping`: a window's, armed by the loop once per window
under several ranks) warns when no step completes for `first` s, or 4 times the slowest
step seen, whichever is longer: on a CPU run (gloo) a rank whose peer stopped mid-window
waits in DDP's backward, which no wait watches (a first step's compile would look like a
stall there). The watch's thread reads the step count (``state.global_step``) at its
looks: no step pays anything; the span is judged only once a step of this `train()`
completed (its compile is never judged), not while a watched wait or an action point
(`pause`) is in progress, its clock started again after each.

One daemon thread per watch, started at a wait or a span, that looks every `first` / 4
seconds, or `roll_call.roll_look` with a roll call if sooner (its `RollCall.held` then told at
each look during a wait, or during a span whose step count did not move since the look
before: a rank held in either, DDP's backward included, reads rank 0's refusal mark
within 2 looks; a warning comes `first` to 1.25 `first` after the wait began); arming and
disarming a wait or a span take an uncontended lock and wake no thread (the stop
agreement waits at every window: a notify there woke the watcher, GIL and all, each
time), and the thread ends after `first` seconds without a wait or a span (a trainer
whose training ended keeps no thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from melissa_trainer.core.roll_call import RollCall, roll_look
from melissa_trainer.core.step_clock import StepClock
from melissa_trainer.core.wait_words import (
    AGREEMENT_USUAL,
    GROUP_TIMEOUT_ENDS,
    IN_HOOK,
    STALLED_USUAL,
    WHAT_TO_DO,
)

__all__ = ["DEFAULT_FIRST_WARNING", "WaitWatch"]

logger = logging.getLogger("melissa_trainer.core.wait_watch")

#: seconds a rank waits in a collective before the first warning (then twice that...)
DEFAULT_FIRST_WARNING = 60.0


class WaitWatch:
    """Warns when a wait wrapped in `waiting` lasts more than `first` seconds, then at
    each doubling of that bound; `rank` names the waiting rank in the warnings.

    Not re-entrant: one wait at a time (the training thread's collectives). `roll`, when
    given, names the late ranks in the warnings (see the module docstring)."""

    def __init__(
        self,
        rank: int,
        first: float = DEFAULT_FIRST_WARNING,
        roll: RollCall | None = None,
        ends: str = GROUP_TIMEOUT_ENDS,
    ) -> None:
        if not first > 0:
            raise ValueError(f"WaitWatch first={first!r}: give a number of seconds > 0")
        self.rank, self.first = rank, float(first)
        self._lock = threading.Lock()
        self._what: str | None = None  # the wait in progress (None: none)
        self._usual = AGREEMENT_USUAL  # its usual cause
        self._since = 0.0
        self._waits = 0  # counts the waits begun: the thread tells one from the next
        self._warned = False  # the wait in progress was warned about
        self._thread: threading.Thread | None = None
        #: the span of steps armed (`stepping`): its reader of the steps completed, and
        #: the count after which it is judged; None: none armed
        self._span: tuple[Callable[[], int], int] | None = None
        self._doing: Callable[[], str | None] | None = None  # its hook method in progress
        self._spans = 0  # spans begun (the thread tells one from the next)
        self._pauses = 0  # pauses begun (`pause`), and those in progress
        self._paused = 0
        #: the thread's judgement of the spans (kept over its restarts: the slowest step)
        self._clock = StepClock(self.first)
        self.roll = roll
        self.ends = ends  # how its waits end if no rank comes (a sentence: the warnings')

    @contextmanager
    def waiting(self, what: str, usual: str = AGREEMENT_USUAL) -> Iterator[None]:
        """Watch the wait in the ``with`` block; `what` completes "waiting for ..."
        (e.g. "the other ranks at the stop agreement"), `usual` (a sentence) names the
        usual cause of a long one, said before the others (`WHAT_TO_DO`). A `waiting`
        begun while another is in progress (nested: never the trainer's) is not watched,
        the one in progress still is: the watch never changes what runs."""
        with self._lock:
            if self._what is not None:  # nested: the wait in progress stays the watched one
                nested = True
            else:
                nested = False
                self._what, self._since, self._warned = what, time.monotonic(), False
                self._usual = usual
                self._waits += 1
                self._start()
        if nested:
            yield
            return
        ended = "ended with an error"  # (what the wait did, if it did not return)
        try:
            yield
            ended = "arrived"
        finally:
            with self._lock:
                warned, since = self._warned, self._since
                self._what, self._warned = None, False
            if warned:
                waited = time.monotonic() - since
                logger.warning("rank %d: %s %s after %.0f s", self.rank, what, ended, waited)

    @contextmanager
    def stepping(
        self, done: Callable[[], int], after: int, doing: Callable[[], str | None] | None = None
    ) -> Iterator[None]:
        """Watch the steps run in the ``with`` block (a window's, `OnlineTrainer.train`):
        warn when no step completes for `first` s, or 4 times the slowest step seen
        completed (at the watch's looks), whichever is longer, then at each doubling,
        and say when steps go on after a warning. `done()` reads the steps completed
        (from the watch's thread: ``state.global_step``'s read); nothing is judged until
        it exceeds `after` (the count at `train()`'s start: a first step's compile is
        never judged), nor while a wait is watched or a `pause` lasts (the clock starts
        again after each), nor after the block. Arming costs one uncontended lock, once
        per block: no step pays anything. `doing()` (read by the thread when it warns)
        names the hook method this rank is in, or None: the warning then says the rank
        is held there, not in a collective (a slow hook holds every other rank)."""
        with self._lock:
            self._doing = doing
            self._span = (done, after)
            self._spans += 1
            self._start()
        try:
            yield
        finally:
            with self._lock:
                self._span = None
                # a stall warned of and not yet seen to end is said now: the run may end
                # (its process exit) before the thread's next look (one look, only then)
                clock, now = self._clock, time.monotonic()
                said = self._look_at_steps(clock, now) if clock.warned else None
            if said is not None:
                self._say_steps(said, clock)

    @contextmanager
    def pause(self) -> Iterator[None]:
        """No step is expected in the ``with`` block (an action point within a window's
        steps: a log, a validation, a save, whose collectives are watched as waits)."""
        with self._lock:
            self._pauses += 1
            self._paused += 1
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1

    def _start(self) -> None:
        """Start the watch's thread if none runs (the lock held)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._watch, name="melissa-wait-watch", daemon=True
            )
            self._thread.start()

    def _look_at_steps(self, clock: StepClock, now: float) -> tuple[str, float, int] | None:
        """One look at the span of steps (the thread, the lock held): `clock`'s verdict
        (`StepClock.look`); not judged while a wait is in progress, a pause lasts,
        before the span's first judged step, or with no span."""
        span, key = self._span, (self._spans, self._pauses, self._waits)
        if span is not None:
            clock.read = span[0]
        done = clock.read() if clock.read is not None else 0  # (after its span: its last)
        judged = span is not None and self._what is None and not self._paused and done > span[1]
        return clock.look(now, key if judged else None, done)

    def _say_steps(self, said: tuple[str, float, int], clock: StepClock) -> None:
        """Say `_look_at_steps`' verdict (the thread, the lock not held)."""
        kind, waited, step = said
        doing = self._doing  # (read once: the training thread may clear it meanwhile)
        hook = doing() if kind == "stalled" and doing is not None else None
        if hook is not None:  # in a hook: said so, not "may wait in its collectives"
            logger.warning(
                "rank %d has completed no step for %.0f s (after step %d): it is in the "
                "hook method %s all this time, %s; %s. %s",
                self.rank,
                waited,
                step - 1,
                hook,
                IN_HOOK,
                WHAT_TO_DO,
                self.ends,
            )
        elif kind == "stalled":
            logger.warning(
                "rank %d has completed no step for %.0f s (in step %d; its slowest step so "
                "far took %.1f s): %s; %s. %s",
                self.rank,
                waited,
                step,
                clock.slowest,
                STALLED_USUAL,
                WHAT_TO_DO,
                self.ends,
            )
        elif kind == "completed":
            logger.warning("rank %d: step %d completed after %.0f s", self.rank, step, waited)
        else:
            logger.warning("rank %d: its steps went on after %.0f s", self.rank, waited)

    def _watch(self) -> None:
        roll = self.roll
        look = self.first / 4 if roll is None else min(self.first / 4, roll_look(roll.world))
        seen, bound, idle_since = -1, self.first, time.monotonic()
        published = -1  # the last wait told to `roll`
        clock = self._clock
        at = (-1, -1)  # the span and its steps at the last look (`stuck`)
        while True:
            time.sleep(look)
            with self._lock:
                now = time.monotonic()
                said = self._look_at_steps(clock, now)
                waiting = self._what is not None
                # a span whose step did not move since the last look: maybe held in its
                # step's collectives (DDP's backward), which no wait watches
                stuck = self._span is not None and not waiting and at == (self._spans, clock.done)
                at = (self._spans, clock.done)
                if not waiting:
                    if self._span is not None:
                        idle_since = now
                    elif self._waits == seen and now - idle_since >= self.first:
                        self._thread = None  # idle (training ended?): the next wait restarts it
                        return
                    if self._waits != seen:
                        seen, idle_since = self._waits, now
                else:
                    if self._waits != seen:  # another wait than the one looked at last
                        seen, bound = self._waits, self.first
                    idle_since = now
                    waited = now - self._since
                    warn = waited >= bound
                    self._warned |= warn
                    what, usual = self._what, self._usual
            if said is not None:
                self._say_steps(said, clock)
            if stuck and self.roll is not None:
                self.roll.held()  # (rank 0's refusal mark, read there too)
            if not waiting:
                continue
            roll = self.roll
            if roll is not None and published != seen:
                published = seen
                roll.arrived(seen)
            if roll is not None:
                roll.held()
            if not warn:
                continue
            late = roll.late(seen) if roll is not None else None
            ranks = f"rank{'s' if late and len(late) > 1 else ''} {', '.join(map(str, late or []))}"
            named = f" (likely late: {ranks})" if late else ""
            logger.warning(
                "rank %d has waited %.0f s for %s: another rank%s has not reached it. %s; %s. %s",
                self.rank,
                waited,
                what,
                named,
                usual,
                WHAT_TO_DO,
                self.ends,
            )
            while bound <= waited:
                bound *= 2
