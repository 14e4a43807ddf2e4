"""`LauncherTuning`: how a study copes with failing or silent simulations, and how often
the launcher looks at its jobs.

`Launcher` takes as arguments what defines a study: what runs (the command or callable,
the sampler, `n_simulations`, the first id), where and how wide (`job_limit`, the
backend, ranks, worker mode and its socket) and what the jobs see (`env`, the log
directory). Everything here has a default that suits any study and changes neither
which simulations run nor where: it bounds how hard the launcher tries (restarts,
redraws, the share that must finish), when it gives up on a silent simulation, what it
does with one that keeps failing, and how often it polls. A newcomer never needs it; a
production study sets a few fields once::

    tuning = LauncherTuning(max_restarts=3, on_failure="abandon")
    launcher = Launcher(command, sampler, 64, job_limit=8, tuning=tuning)

The dataclass is frozen and checks itself when made (`dataclasses.replace` checks
again): a bad value raises ValueError naming the field and what it accepts, before
anything starts; so does a field that would change nothing with the others
(`silence_floor` or `silence_factor` without ``simulation_timeout="auto"``, a
`startup_timeout` that bounds nothing).

Three fields tell their default from the same number set (`silence.Default`, a float
equal to it): `startup_timeout`, `silence_floor` and `silence_factor`. The repr marks
the ones left at their default (``startup_timeout=600.0 (default)``), and two tunings
are equal (and hash alike) only when the same fields were set to the same values:
``LauncherTuning(simulation_timeout=10)`` bounds a start-up at 10 s,
``LauncherTuning(simulation_timeout=10, startup_timeout=600)`` at 600 s, and they are
not equal. Pickling, `copy`, `dataclasses.replace` and a tuning rebuilt from
`dataclasses.asdict` keep the defaults as such; JSON writes plain numbers, so a tuning
read back from JSON has every field set.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from melissa_trainer.common.checks import check_count
from melissa_trainer.launcher.attempt_policy import ON_FAILURE
from melissa_trainer.launcher.silence import (
    AUTO,
    FACTOR_DEFAULT,
    FLOOR_DEFAULT,
    STARTUP_DEFAULT,
    Default,
)

__all__ = ["LauncherTuning"]


@dataclass(frozen=True)
class LauncherTuning:
    """Failure policy and timing of a `Launcher` (see the module docstring).

    Attributes:
        simulation_timeout: seconds of a simulation's silence (no message received;
            without a heartbeat, since launch) after which it is killed, named with its
            parameters, attempt and log, and counts as a failed attempt. Only its own
            silence counts: not the time the trainer was paused or not reading (its
            buffer full); see `melissa_trainer.launcher.silence`. ``"auto"`` (default):
            derived from what the study has seen: once a simulation has sent a
            message, ``max(silence_floor, silence_factor x the longest silence between
            two messages seen)`` (`silence_floor` while none is seen: a hang mid-stream
            is found in 2 minutes by default), and before its first message (or once
            its data is complete: its exit) ``max(startup_timeout, silence_factor x the
            longest start-up seen)``; never
            without a heartbeat (a launcher outside a `Study`). A number: that many
            seconds, between two messages and, unless you set `startup_timeout`, before
            the first message too (and once its data is complete); with
            `startup_timeout` set, ``max(simulation_timeout, startup_timeout)`` there.
            Without a heartbeat no message is seen: the whole attempt is its start-up.
            None: never.
        silence_floor: the least ``"auto"`` timeout between two messages; default 120 s.
            A solver whose messages come further apart (a step of more than 2 minutes)
            needs a higher floor: its first such silence is taken for a hang. Only
            ``"auto"`` uses it: set with a numeric `simulation_timeout` (which is the
            bound between two messages itself) or None, it is refused.
        silence_factor: how many times the longest silence seen ``"auto"`` allows;
            default 10. Refused, as `silence_floor` is, without ``"auto"``.
        startup_timeout: the allowance before a simulation's first message (imports,
            set-up, its first step): with ``"auto"``, the least one (default 600 s, the
            stream's `stall_timeout`); with a numeric `simulation_timeout`, only when
            you set it (then ``max(simulation_timeout, startup_timeout)``: a value below
            `simulation_timeout` is refused, it would change nothing). The default is
            told from a value you set (`silence.Default`; the repr shows
            ``startup_timeout=600.0 (default)``) because honouring it
            would have every numeric `simulation_timeout` wait 600 s for a hung
            start-up; unset, the numeric timeout bounds the start-up as it always did.
            None: no bound before the first message (refused with
            ``simulation_timeout=None``, which bounds nothing). Under a `Study`
            the stream's `ReceiverConfig.stall_timeout` needs no raising with it: the
            stall watchdog waits while every job is within this allowance or queued
            (`melissa_trainer.launcher.expected_silence`). With None, a start-up
            has no bound but the stream's `stall_timeout`. (A job queued by a
            scheduler is never timed: neither bound counts its wait.)
        max_restarts: restarts of one simulation id (same parameters) before
            `on_failure` applies; default 2.
        final_exit_codes: exit codes by which a solver says its failure will repeat
            (systemd's ``RestartPreventExitStatus=``): an attempt that exits with one is
            not restarted, `on_failure` applies at once, and its record says so
            ("exit 3 is one of LauncherTuning.final_exit_codes: not restarted").
            Each in 1..255; default () (every failure is restarted). In worker mode it
            is the code a worker exits with while running a simulation, or reports
            with ``next_simulation(exit_code=...)``. Under ``mpiexec`` the code seen
            is the highest of the ranks'; under a several-task ``srun`` whose status is
            the others' SIGTERM (143), the first failed task's own code, from srun's
            lines in the job's log (see docs/concepts/study.md).
        on_failure: what happens to a simulation that failed ``max_restarts + 1`` times:
            "redraw" (default: given up, a new id with new parameters replaces it),
            "abandon" (given up, the study goes on without it) or "raise" (the study
            fails; `Launcher.check()` raises).
        max_redraws: redraws allowed in the study; beyond, a failure raises. None
            (default): `n_simulations`.
        min_finished_fraction: the share of `n_simulations` that must finish (0 < f <= 1,
            default 0.5): the study fails (`check()` raises, listing the failures with
            the last lines of their logs) as soon as more than ``n_simulations -
            ceil(f * n_simulations)`` simulations were given up (redrawn or abandoned).
            A study with no finished simulation always fails.
        systematic_failures: when the study's first failed attempts, this many of them
            (of at least two simulations), all ended with the same exit code and last
            log line before any simulation sent data, the study stops at once with one
            report: the solver cannot run, whatever its parameters (see
            `melissa_trainer.launcher.systematic`); default 4, None: never (the
            failure policy alone decides).
        poll_interval: seconds between two checks of the jobs (exit codes, heartbeats,
            data reports); default 0.2. Lower reacts faster and costs a little CPU.
        kill_grace: seconds between SIGTERM (or ``scancel``) and the forced kill of a
            job; default 5. `Launcher.stop` signals every job, then blocks up to this
            long for them all (`Backend.kill_all`).

    Raises:
        ValueError: a field out of range or of the wrong type (the message names it).
    """

    simulation_timeout: float | str | None = AUTO
    max_restarts: int = 2
    on_failure: str = "redraw"
    max_redraws: int | None = None
    min_finished_fraction: float = 0.5
    poll_interval: float = 0.2
    kill_grace: float = 5.0
    silence_floor: float = FLOOR_DEFAULT
    silence_factor: float = FACTOR_DEFAULT
    startup_timeout: float | None = STARTUP_DEFAULT
    systematic_failures: int | None = 4
    final_exit_codes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_count("LauncherTuning.max_restarts", self.max_restarts, 0, "restarts of an id")
        self._check_final_codes()
        if self.max_redraws is not None:
            check_count("LauncherTuning.max_redraws", self.max_redraws, 0, "or None: n_simulations")
        if self.on_failure not in ON_FAILURE:
            raise ValueError(
                f"LauncherTuning.on_failure must be one of {list(ON_FAILURE)}, "
                f"not {self.on_failure!r}"
            )
        fraction = self.min_finished_fraction
        if not _is_number(fraction) or not 0 < fraction <= 1:
            raise ValueError(
                f"LauncherTuning.min_finished_fraction must be a number in (0, 1] (the "
                f"share of n_simulations that must finish), not {fraction!r}"
            )
        if self.simulation_timeout is not None and self.simulation_timeout != AUTO:
            self._seconds(
                "simulation_timeout", positive=True, none="or 'auto', or None for no timeout"
            )
        self._seconds("silence_floor", positive=True)
        if not _is_number(self.silence_factor) or not 1 <= self.silence_factor < math.inf:
            raise ValueError(
                f"LauncherTuning.silence_factor must be a finite number >= 1 (times the "
                f"longest silence seen), not {self.silence_factor!r}"
            )
        if not isinstance(self.silence_factor, Default):
            object.__setattr__(self, "silence_factor", float(self.silence_factor))
        for name in ("silence_floor", "silence_factor"):
            self._check_derived(name)
        if self.startup_timeout is not None and self.startup_set:
            self._seconds("startup_timeout", positive=True, none="or None for no bound")
            self._check_startup(self.startup_timeout)
        if self.systematic_failures is not None:
            check_count(
                "LauncherTuning.systematic_failures",
                self.systematic_failures,
                2,
                "failed attempts, or None to turn the check off",
            )
        self._seconds("poll_interval", positive=True)
        self._seconds("kill_grace", positive=False)

    @property
    def startup_set(self) -> bool:
        """Whether `startup_timeout` was set by the user (not left at its default)."""
        return not isinstance(self.startup_timeout, Default)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, LauncherTuning):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[Any, ...]:
        """The fields, and which were left at their default (`Default`): what makes two
        tunings equal (the module docstring says why)."""
        values = tuple(getattr(self, f.name) for f in dataclasses.fields(self))
        return values + tuple(isinstance(v, Default) for v in values)

    def startup_allowance(self) -> float | None:
        """The seconds a simulation may send nothing before its first message, as set
        (``"auto"`` may allow more, from the start-ups it has seen); None: no bound."""
        timeout = self.simulation_timeout
        if timeout is None:
            return None
        if timeout == AUTO:
            return self.startup_timeout
        assert isinstance(timeout, float)
        if not self.startup_set:
            return timeout
        return None if self.startup_timeout is None else max(timeout, self.startup_timeout)

    def _check_final_codes(self) -> None:
        """Check `final_exit_codes` and store it as a sorted tuple without repeats (the
        dataclass is frozen and hashed: a list given is made a tuple)."""
        codes = self.final_exit_codes
        if isinstance(codes, str | bytes) or not isinstance(codes, tuple | list | set | frozenset):
            raise ValueError(
                f"LauncherTuning.final_exit_codes must be a tuple of exit codes in 1..255, "
                f"not {codes!r}"
            )
        for code in codes:
            if isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 255:
                zero = " (0 is success: never a failure)" if code == 0 else ""
                raise ValueError(
                    f"LauncherTuning.final_exit_codes must hold exit codes in 1..255, not "
                    f"{code!r}{zero}"
                )
        object.__setattr__(self, "final_exit_codes", tuple(sorted(set(codes))))

    def _check_derived(self, name: str) -> None:
        """Refuse `silence_floor` or `silence_factor` set without ``"auto"``: nothing
        else reads them, and a user who set one believed it bounded something."""
        value, timeout = getattr(self, name), self.simulation_timeout
        if isinstance(value, Default) or timeout == AUTO:
            return
        if timeout is None:
            said = (
                "bounds nothing with simulation_timeout=None (no simulation is ever "
                "killed for its silence)"
            )
        else:
            said = (
                f"changes nothing with simulation_timeout={timeout} (a numeric timeout is "
                f"the bound between two messages itself: a solver silent longer needs a "
                f"larger simulation_timeout)"
            )
        raise ValueError(
            f"LauncherTuning.{name}={value} {said}: silence_floor and silence_factor shape "
            f"only the derived timeout; set simulation_timeout='auto' to use {name}, or "
            f"leave {name} unset"
        )

    def _check_startup(self, startup: float) -> None:
        """Refuse a `startup_timeout` set by the user that would bound nothing."""
        timeout = self.simulation_timeout
        if timeout is None:
            raise ValueError(
                f"LauncherTuning.startup_timeout={startup} bounds nothing with "
                f"simulation_timeout=None (no simulation is ever killed for its silence): "
                f"set simulation_timeout='auto' or a number of seconds to bound the "
                f"start-up, or leave startup_timeout unset"
            )
        if timeout != AUTO and startup < float(timeout):
            raise ValueError(
                f"LauncherTuning.startup_timeout={startup} is below simulation_timeout="
                f"{timeout}: the start-up is allowed max(simulation_timeout, "
                f"startup_timeout), so it would change nothing; set startup_timeout above "
                f"simulation_timeout for a slower start-up, or leave it unset (the numeric "
                f"simulation_timeout then bounds the start-up too)"
            )

    def _seconds(self, name: str, *, positive: bool, none: str = "") -> None:
        """Check a duration field and store it as a float (the dataclass is frozen)."""
        value = getattr(self, name)
        bound = "> 0" if positive else ">= 0"
        if (
            not _is_number(value)
            or not math.isfinite(value)
            or value < 0
            or (positive and value == 0)
        ):
            hint = f" ({none})" if none else ""
            raise ValueError(
                f"LauncherTuning.{name} must be a finite number of seconds {bound}{hint}, "
                f"not {value!r}"
            )
        if not isinstance(value, Default):  # (kept: it tells the default from a value set)
            object.__setattr__(self, name, float(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
