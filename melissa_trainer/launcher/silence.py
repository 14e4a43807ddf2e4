"""When a simulation is silent by its own doing, and how long is too long.

A simulation's heartbeat is the count of its messages the receiver took in. It stops
for three reasons: the simulation hangs (what `simulation_timeout` is for), it computes
a long step, or the trainer is not reading. Only the first two are the simulation's
silence; `SilenceClock` leaves the third out:

* **A paused or starved trainer** (SIGSTOP, a suspended job, a swapped node, a node
  so loaded that the trainer's process waits for a core): the launcher's thread runs
  in the trainer's process and stops with it, as does the receiver whose count is the
  heartbeat, and on resume finds that `time.monotonic()` jumped. A tick counts at most
  `tick_cap` seconds (``TICK_POLLS`` poll intervals plus ``TICK_SLACK``: a tick's own
  work takes milliseconds) since the previous one; the rest is the launcher's own
  lateness, not the simulation's silence (`paused` sums it). Before, a tick late by
  less than 2 s counted in full: on a loaded 2-core machine a simulation streaming
  every 0.1 s, with a 1 s bound, was killed as silent when the trainer's process was
  not scheduled for 1.5 s. A hang is still found: the ticks that come on time count in
  full, and each late one counts `tick_cap`, so its silence is counted later, never
  sooner, the more the trainer is starved.
* **Back-pressure**: the receiver waits for room in the buffer (training is slower
  than the stream, or busy with a validation or a checkpoint), and the simulations
  wait for the receiver. A tick at which the receiver is found waiting counts none of
  the time since the previous tick. (Sampled at each tick: a silence clock, not a
  stopwatch; what it leaves out is the trainer's, never the simulation's.)

How long is too long (`LauncherTuning.simulation_timeout`):

* a number: that many seconds of silence between two messages, and before the
  attempt's first message (and once its data is complete: its exit) as well, unless
  the user set `startup_timeout`: then ``max(simulation_timeout, startup_timeout)``
  there (`startup_timeout=None`: no bound there). Only a `startup_timeout` the user set
  counts (`Default`): the default, 600 s, would lengthen to 10 minutes the
  start-up kill of every study that set a numeric timeout of, say, 30 s to find a hung
  start-up in 30 s; one the user set is an allowance they asked for (a trial's solver,
  20 s to load its mesh, was killed at 10 s with `simulation_timeout=10,
  startup_timeout=60`, and the report told them to raise the `startup_timeout` they had
  set). Without a heartbeat no message is ever seen: all of an attempt is a start-up;
* ``"auto"`` (the default, with a receiver's heartbeat): derived from what the study
  has seen. Once an attempt has sent its first message, ``max(silence_floor,
  silence_factor x`` the longest silence between two messages of any simulation so
  far``)``, which is `silence_floor` until such a silence is seen (a study whose
  simulations send all their steps within one tick never sees one: the start-up
  bound there would let a hang mid-stream last 10 minutes per attempt). Before an
  attempt's first message, ``max(startup_timeout, silence_factor x`` the longest
  start-up seen``)``. A simulation that hangs after its steps came every second is
  killed after `silence_floor` seconds (2 minutes), named with its parameters, attempt
  and log; one whose steps take a minute gets ten. A solver whose first silence
  between two messages is longer than `silence_floor` (a step of more than 2 minutes)
  is killed at its first such silence: raise `silence_floor` (the kill's warning
  says so). Once every step of the attempt reached the buffer (the study records it
  "complete"), what is left is its exit (its client's close, its own output, an MPI
  finalize, the interpreter's teardown): not a silence between messages, and bounded as
  a start-up is. The bound between two messages would kill a solver that writes its
  results for longer than that after its last step, or whose exit a busy node slows
  (a floor of 1 s killed a finished 6-step simulation whose exit took 1.8 s at load 12);
* None: never.

Used by the launcher's thread only (no lock).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

__all__ = [
    "AUTO",
    "FACTOR_DEFAULT",
    "FLOOR_DEFAULT",
    "STARTUP_DEFAULT",
    "TICK_POLLS",
    "TICK_SLACK",
    "Default",
    "SilenceClock",
    "Verdict",
]

#: `LauncherTuning.simulation_timeout` derived from what the study has seen
AUTO = "auto"


class Default(float):
    """A `LauncherTuning` field left at its default (`startup_timeout`, `silence_floor`,
    `silence_factor`): a float equal to it (every reader computes with it as before),
    told apart from the same number set by the user by its type, which
    `dataclasses.replace` (it passes the object on), `copy`, pickling and
    `dataclasses.asdict` keep. Its repr says so (``600.0 (default)``: the tuning's repr
    shows which fields were set); its str and format are the float's (messages print
    the number; ``json.dumps`` writes the number, so a tuning rebuilt from JSON has the
    field set). The default `startup_timeout` bounds a start-up under
    ``simulation_timeout="auto"`` only; a value the user set bounds it under a numeric
    `simulation_timeout` too (module docstring)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{float.__repr__(self)} (default)"

    def __str__(self) -> str:
        return float.__repr__(self)


#: the defaults of `LauncherTuning.startup_timeout`, `silence_floor` and `silence_factor`
STARTUP_DEFAULT = Default(600.0)
FLOOR_DEFAULT = Default(120.0)
FACTOR_DEFAULT = Default(10.0)
#: a tick counts as silence at most this many poll intervals since the previous one ...
TICK_POLLS = 2
#: ... plus these seconds (the tick's own work, a scheduler's jitter); the rest is the
#: trainer's lateness (module docstring)
TICK_SLACK = 0.1


@dataclass(frozen=True)
class Verdict:
    """A silence past its bound: how long, the bound, what the bound is (`rule`, for the
    WARNING) and the `LauncherTuning` setting that lengthens it (`setting`, for the
    kill's short line in the job's log)."""

    silent: float
    timeout: float
    rule: str
    setting: str = "simulation_timeout"


class SilenceClock:
    """The silence of each job's simulation, and its bound (module docstring).

    Args:
        timeout: seconds, ``"auto"`` or None (`LauncherTuning.simulation_timeout`).
        floor, factor, startup: the derived bound's `silence_floor`,
            `silence_factor` and `startup_timeout` (seconds; `startup` None: none; a
            `Default`: the default, which a numeric `timeout` ignores).
        poll_interval: the launcher's seconds between ticks (a tick counts at most
            `TICK_POLLS` of them plus `TICK_SLACK` s: `tick_cap`).
        heartbeat: whether the receivers report messages; without, silence is the
            time since the attempt started, and ``"auto"`` is never.
    """

    def __init__(
        self,
        timeout: float | str | None,
        *,
        floor: float,
        factor: float,
        startup: float | None,
        poll_interval: float,
        heartbeat: bool,
    ) -> None:
        self.timeout = None if timeout == AUTO and not heartbeat else timeout
        self.floor, self.factor = float(floor), float(factor)
        #: whether the user set `startup` (a numeric `timeout` then honours it)
        self.startup_set = not isinstance(startup, Default)
        self.startup = None if startup is None else float(startup)
        #: the most seconds one tick counts as silence (module docstring)
        self.tick_cap = TICK_POLLS * poll_interval + TICK_SLACK
        self._last: float | None = None  # the previous tick
        #: seconds of the trainer's pauses and lateness left out so far (logs, tests)
        self.paused = 0.0
        self.longest_gap = 0.0  # the longest silence between two messages, seen
        self.longest_startup = 0.0  # the longest time to a first message, seen
        self._gap_seen = False

    @property
    def enabled(self) -> bool:
        return self.timeout is not None

    def tick(self, now: float, reading: bool) -> float:
        """The seconds since the previous tick that count as silence: at most
        `tick_cap` (the rest is the trainer's pause or lateness: `paused`), none while
        the receiver waits for buffer room (`reading` False)."""
        last, self._last = self._last, now
        if last is None:
            return 0.0
        elapsed = max(0.0, now - last)
        counted = min(elapsed, self.tick_cap)
        self.paused += elapsed - counted
        return counted if reading else 0.0

    def heard(self, silent: float, first: bool) -> None:
        """A message came after `silent` seconds of silence (`first`: the attempt's
        first): a sample for the derived bound."""
        if first:
            self.longest_startup = max(self.longest_startup, silent)
        else:
            self.longest_gap = max(self.longest_gap, silent)
            self._gap_seen = True

    def bound(self, sending: bool, complete: bool = False) -> tuple[float, str] | None:
        """The bound on a silence, in seconds, and the rule that gives it (for the
        message); None: no bound. `sending`: the attempt has sent a message;
        `complete`: every step of it reached the buffer (it is ending: module
        docstring)."""
        timeout = self.timeout
        if timeout is None:
            return None
        if timeout != AUTO:
            return self._fixed(float(timeout), sending, complete)
        if sending and not complete:
            # between two messages: what the study has seen of them, at least the floor
            # (none seen yet: the floor, never the start-up bound)
            value = max(self.floor, self.factor * self.longest_gap)
            seen = f"{self.longest_gap:.1f} s" if self._gap_seen else "none yet"
            return value, (
                f"simulation_timeout='auto': max(silence_floor={self.floor}, "
                f"silence_factor={self.factor} x the longest silence between two messages "
                f"seen, {seen}); a solver silent longer between two messages needs a "
                f"higher silence_floor"
            )
        if self.startup is None:
            return None
        value = max(self.startup, self.factor * self.longest_startup)
        when = "after its last step, its data complete" if complete else "before its first message"
        return value, (
            f"simulation_timeout='auto', {when}: "
            f"max(startup_timeout={self.startup}, silence_factor={self.factor} x the "
            f"longest start-up seen, {self.longest_startup:.1f} s); a slower start-up "
            f"needs a larger startup_timeout"
        )

    def shortest(self) -> float | None:
        """The shortest bound an attempt launched now may be judged by (before its first
        message, or between two), or None when neither has one: what the launcher tells
        each job it starts (``MELISSA_TRAINER_SILENCE_S``), so that a rerun that skips the
        steps its receivers hold sends a sign of life well within it
        (`melissa_trainer.client.rerun`). Under ``"auto"`` the bound only grows as the
        study sees longer silences: the value now is never too long."""
        bounds = [b[0] for b in (self.bound(False), self.bound(True)) if b is not None]
        return min(bounds) if bounds else None

    def _fixed(self, timeout: float, sending: bool, complete: bool) -> tuple[float, str] | None:
        """`bound` under a numeric `simulation_timeout` (module docstring)."""
        rule = f"simulation_timeout={timeout}"
        if sending and not complete:
            return timeout, rule
        if not self.startup_set:  # (the default startup_timeout: `Default`)
            if sending:  # its exit, as before
                return timeout, rule
            return timeout, (
                f"{rule}, before its first message: a numeric simulation_timeout bounds "
                f"the start-up too while startup_timeout is unset; a slower start-up needs "
                f"LauncherTuning(startup_timeout=...) (the start-up is then allowed "
                f"max(simulation_timeout, startup_timeout)) or a larger simulation_timeout"
            )
        if self.startup is None:
            return None
        when = "after its last step, its data complete" if complete else "before its first message"
        return max(timeout, self.startup), (
            f"max(simulation_timeout={timeout}, startup_timeout={self.startup}), {when}; "
            f"a slower start-up needs a larger startup_timeout"
        )

    def sooner(self, own_gap: float | None, bound: float) -> str:
        """The other direction of a kill between two messages at `bound` seconds: the
        tighter bound the study's steps allow, or "" when it would not be tighter, or
        when no gap was seen and the bound is a numeric `simulation_timeout` (the user's
        own choice: nothing to weigh it by). (A user trial's solver, steps of at most
        0.6 s, hung mid-run: killed at the 120 s floor three times, 6.5 minutes, and the
        line said only how to wait longer.)

        The setting it names (`silence_floor` under ``"auto"``, else
        `simulation_timeout`) bounds every simulation of the study: its value is
        `silence_factor` x the longest silence between two messages the study has seen
        (`longest_gap`, of any simulation; `own_gap`, the killed attempt's, None: it sent
        one message, is among them), rounded up, so a slower step than any seen still
        passes; before, the killed attempt's own gap alone, 0.5 s, named
        ``simulation_timeout=5`` in a study whose healthy simulations' 20 s steps it
        would kill. The bound stated is the one `bound` gives under that setting, with
        what the study has seen (the floor's is no lower than the silences seen
        allow)."""
        if not self._gap_seen and own_gap is None:
            if self.timeout != AUTO:  # (a bound the user chose, no gap to weigh it by)
                return ""
            return (
                "; no silence between two messages seen yet: if the solver's steps are "
                "short, a bound a few times the longest step catches a hang sooner, "
                + self._knob("S")
            )
        gap = max(self.longest_gap, own_gap or 0.0)
        value = max(1, math.ceil(self.factor * gap))
        tighter = self._tuned(value, gap).bound(sending=True)
        if tighter is None or tighter[0] >= bound:
            return ""
        own = "it sent one message" if own_gap is None else f"{own_gap:.1f} s"
        return (
            f"; the longest silence between two messages the study has seen, of any "
            f"simulation, was {gap:.1f} s (this attempt's: {own}): if no step takes "
            f"longer, {self._knob(str(value))} catches a hang sooner, after "
            f"{tighter[0]:.0f} s instead of {bound:.0f} s"
        )

    def _tuned(self, value: float, gap: float) -> SilenceClock:
        """This clock as `_knob`'s setting at `value` would make it, having seen what this
        one has and `gap`: its `bound` is what that setting would really give (one rule,
        this class's, not a copy of its formula)."""
        out = copy.copy(self)
        if self.timeout == AUTO:
            out.floor = float(value)
        else:
            out.timeout = float(value)
        out.heard(gap, first=False)
        return out

    def _knob(self, value: str) -> str:
        """The setting that bounds the silence between two messages at `value` s for the
        whole study: `silence_floor` under ``"auto"`` (the bound it gives grows with the
        silences seen: `sooner` states it), else a numeric `simulation_timeout`."""
        if self.timeout == AUTO:
            return (
                f"LauncherTuning(silence_floor={value}) (simulation_timeout='auto' still "
                f"grows it to silence_factor x the longest silence seen; the start-up keeps "
                f"its own bound)"
            )
        return (
            f"LauncherTuning(simulation_timeout={value}) (startup_timeout=... to allow the "
            f"start-up longer)"
        )

    def judge(self, silent: float, sending: bool, complete: bool = False) -> Verdict | None:
        """A `Verdict` if `silent` seconds are past the bound (`bound`), else None."""
        bound = self.bound(sending, complete)
        if bound is None or silent <= bound[0]:
            return None
        return Verdict(silent, bound[0], bound[1], self._setting(sending, complete))

    def _setting(self, sending: bool, complete: bool) -> str:
        """The setting whose increase lengthens `bound(sending, complete)`, as its rule
        names it at the end ("... needs a larger startup_timeout"; a numeric timeout
        between two messages: itself)."""
        between = sending and not complete
        if self.timeout == AUTO:
            return "silence_floor" if between else "startup_timeout"
        if between or (sending and not self.startup_set):
            return "simulation_timeout"
        return "startup_timeout"
