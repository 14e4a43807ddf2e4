"""What the launcher says once per study about the solver, with the fix:

* **Start-up dominates.** Each first attempt's launch-to-first-message is timed and
  summed in `startup_seconds` (`Launcher.summary`'s split of ``simulation_seconds``); a
  rerun's (a restart, or a resumed study's rerun: `first_message`) in
  `rerun_startup_seconds`, apart: it may hold recomputed steps, not start-up alone. In
  worker mode a simulation's process is its worker's, started once: each worker's
  launch-to-first-request (its start-up, imports and JIT, timed as the request comes) is
  summed there too, beside each simulation's time from its assignment to its first
  message. The first simulation that ends (exit 0) with its start-up at least
  `STARTUP_FLOOR` s and `STARTUP_SHARE` of its wall time gets one WARNING (never said in
  worker mode), whose fix depends on the client library the simulation's HELLO named
  (`DataReport.client_of`): worker mode, which pays the start-up once per job, for the
  Python client (its ``next_simulation()`` is worker mode's job side); for the C client
  (and the Fortran bindings on it), which has no worker mode, what the guide says helps
  a compiled solver: longer simulations (more time steps per process) and
  ``startup_timeout`` sized to the start-up; for a client that did not say (an older
  one), worker mode as the fix of a Python solver only. Only a first attempt's start-up
  is judged so: a rerun's first message heard may come after it recomputed the steps its
  receivers hold (`Advice.first_message`). A program that turns worker mode on for its
  user (an example's ``--worker``) says how (`Launcher`'s `worker_hint`), and the Python
  fix names that first.
* **A deterministic failure.** The first restart that fails as the attempt before it
  did (the same exit code, or both killed for silence) gets one WARNING: a
  deterministic solver fails the same way with the same parameters, every restart
  costing as long again (a hang: a whole timeout). For an exit code the advice names
  ``final_exit_codes=(code,)``, which gives up at once on that code only; otherwise
  ``max_restarts=0``, which gives up at the first failure and redraws. Both killed for
  silence before their first message, it names the start-up's bound
  (``startup_timeout``) first: a start-up slower than its bound reads as a hang, and
  redrawn parameters start as slowly. Not for exit 75
  (`client.worker.NOT_DELIVERED_EXIT_CODE`: the trainer did not take a worker's data or
  confirm its BYE, a failure to try again): its WARNING points at the trainer instead.

A start-up ends at the arrival of the simulation's first DATA message as the receiver
timed it (`DataReport.first_message_at`): exact, however late the launcher's thread
comes on a loaded machine. Where the receiver's first message is not this attempt's (a
restart, the simulation having sent before) or no receiver reports, it ends at the last
tick of the supervisor that found no message (a lower bound, to within a poll).

Used by the launcher's thread only (no lock; `startup_seconds` is read from any thread:
a float, best effort).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE
from melissa_trainer.launcher.exit_cause import code_signal, code_text, codes_text
from melissa_trainer.launcher.log_lines import warn

__all__ = ["STARTUP_FLOOR", "STARTUP_SHARE", "Advice"]

logger = logging.getLogger("melissa_trainer.launcher")

#: a simulation whose launch-to-first-message took at least `STARTUP_FLOOR` s and
#: `STARTUP_SHARE` of its wall time is dominated by its start-up (imports, JIT, set-up)
STARTUP_FLOOR = 2.0
STARTUP_SHARE = 0.5

_PYTHON_STARTUP = "(imports, JIT compilation, set-up)"
_WORKER_MODE = (
    "Launcher(..., worker=True), the solver looping on "
    "melissa_trainer.client.worker.next_simulation() (see the guide's 'Stream from your "
    "own solver' page, docs/how-to/own-solver.md)"
)
#: the fix said, by the client library the simulation's HELLO named (None: unknown);
#: {worker} is `_WORKER_MODE`, after the program's own `worker_hint` if it has one
_FIX = {
    "python": "Worker mode pays it once per job: {worker};",
    # worker mode needs next_simulation(), which the C and Fortran clients lack
    # (docs/how-to/compiled-solver.md, 'A slow start-up'): say what helps them instead
    "c": (
        "The C and Fortran clients have no worker mode (it needs the Python client's "
        "next_simulation()): each simulation's process pays it, so fewer, longer "
        "simulations (more time steps each) pay it less often, and a start-up longer "
        "than LauncherTuning(startup_timeout=...) is killed as hung (with a numeric "
        "simulation_timeout, only if you set startup_timeout; unset, the timeout bounds "
        "the start-up) (see the guide's "
        "'Stream from a C, C++ or Fortran solver' page, docs/how-to/compiled-solver.md);"
    ),
    None: (
        "If the solver uses the Python client, worker mode pays it once per job: "
        "{worker}; the C and Fortran clients have no worker mode;"
    ),
}


def _load_note() -> str:
    """A sentence when this machine is loaded (load average above its usable cores),
    or "": a loaded machine stretches every start-up (the heat example's solver, whose
    start-up is its imports, got the advice at load 5-9 on 2 cores), and the advice may
    then be the load's."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # (no load average on this platform)
        return ""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not cores or load <= cores:
        return ""
    return (
        f" This machine is loaded (load average {load:.1f} on {cores} usable cores), which "
        "slows every start-up: if the solver starts in well under "
        f"{STARTUP_FLOOR:.0f} s on a quiet machine, the load is the cause, not the solver."
    )


class Advice:
    """The once-per-study advice of the module docstring.

    Args:
        worker_mode: the study runs workers (start-up is already paid once per job).
        worker_hint: how the program's user turns worker mode on (`Launcher`'s
            `worker_hint`, e.g. an example's flag), named before `Launcher(...,
            worker=True)` in the Python fix; None: that alone.
    """

    def __init__(self, worker_mode: bool, worker_hint: str | None = None) -> None:
        self.worker_mode = worker_mode
        self.worker_hint = worker_hint
        #: launch-to-first-message seconds of the first attempts that sent one, and in
        #: worker mode launch-to-first-request seconds of the workers that asked (this
        #: run's): the start-up the study paid
        self.startup_seconds = 0.0
        #: launch-to-first-message seconds of the reruns that sent one (this run's): a
        #: start-up plus, maybe, recomputed steps (`first_message`), kept apart so that
        #: `startup_seconds` is start-up alone
        self.rerun_startup_seconds = 0.0
        # of the attempts not ended yet, by id: (start-up, client library or None)
        self._startups: dict[int, tuple[float, str | None]] = {}
        #: simulation id -> its attempts in a row that ended before their first message
        #: (a timeout there is a start-up killed, not a hang mid-run: `failed`)
        self._silent_ends: dict[int, int] = {}
        self._startup_told = self._failure_told = False
        #: the attempts not ended yet that are reruns (`first_message`)
        self._reruns: set[int] = set()
        #: simulation id -> its last kill's way to catch a hang sooner
        #: (`SilenceClock.sooner`: "" or "; ..."), told again with a hang that repeats
        self.hang_sooner: dict[int, str] = {}

    def first_message(
        self, simulation_id: int, startup: float, client: str | None = None, rerun: bool = False
    ) -> None:
        """An attempt's first message came `startup` seconds after its launch; `client`:
        the client library its HELLO named (`wire.CLIENT_KINDS`), None if unknown;
        `rerun`: an attempt after the simulation's first (a restart, or a resumed study's
        rerun), which the start-up warning leaves out: its receivers hold some of its
        steps and it does not send them (`client.rerun`), and its first send, which goes
        at once, goes to the receiver its step 0 is routed to. Under several trainer ranks
        that may be another rank's than rank 0's, whose messages alone the launcher
        hears, so what reads as its start-up there is its start-up plus the recomputed
        held steps (a user trial's resumed 2-rank run: "spent 14.3 s of its 15.1 s
        before its first message" of a solver starting in 5 s). Summed in
        `startup_seconds` for a first attempt, `rerun_startup_seconds` for a rerun."""
        self._startups[simulation_id] = (startup, client)
        if rerun:
            self.rerun_startup_seconds += startup
            self._reruns.add(simulation_id)
        else:
            self.startup_seconds += startup

    def worker_started(self, startup: float) -> None:
        """A worker's first request came `startup` seconds after its launch (worker
        mode: the start-up it pays once for all its simulations)."""
        self.startup_seconds += startup

    def ended(self, simulation_id: int, code: int | str, wall: float) -> None:
        """An attempt's process ended after `wall` seconds with `code`."""
        startup, client = self._startups.pop(simulation_id, (None, None))
        rerun = simulation_id in self._reruns
        self._reruns.discard(simulation_id)
        if startup is None:
            self._silent_ends[simulation_id] = self._silent_ends.get(simulation_id, 0) + 1
        else:
            self._silent_ends.pop(simulation_id, None)
        if (
            code != 0
            or startup is None
            or rerun  # (not its start-up alone: `first_message`)
            or self._startup_told
            or self.worker_mode
            or startup < STARTUP_FLOOR
            or startup < STARTUP_SHARE * wall
        ):
            return
        self._startup_told = True
        what = "(MPI_Init, reading a mesh, set-up)" if client == "c" else _PYTHON_STARTUP
        warn(
            logger,
            f"simulation {simulation_id} spent {startup:.1f} s of its {wall:.1f} s before its "
            f"first message: start-up {what} dominates its wall time, and every simulation "
            f"pays it again. {self._fix(client)} Launcher.summary()['startup_seconds'] has "
            f"the study's total.{_load_note()} Said once per study.",
        )

    def _fix(self, client: str | None) -> str:
        """The start-up fix for `client` (`_FIX`), with this program's `worker_hint`."""
        worker = _WORKER_MODE
        if self.worker_hint:
            worker = f"{self.worker_hint}; in a study of your own, {_WORKER_MODE}"
        return _FIX.get(client, _FIX[None]).format(worker=worker)

    def failed(self, simulation_id: int, codes: Sequence[int | str]) -> None:
        """An attempt failed; `codes`: the exit codes of the simulation's attempts."""
        if self._failure_told or len(codes) < 2 or codes[-1] != codes[-2]:
            return
        self._failure_told = True
        # (an exit code reads as one: "failed again (exit 1)", not "failed (1) again";
        # one that carries a signal names it, "exit 143 (SIGTERM)": `exit_cause`)
        code = codes[-1]
        if code == NOT_DELIVERED_EXIT_CODE:
            # (the trainer's side, sysexits' "try again": final_exit_codes=(75,) would give
            # up every simulation a trainer's hiccup failed, and the solver is not at fault)
            warn(
                logger,
                f"simulation {simulation_id} failed again (exit {code}) on its restart, as on "
                f"its previous attempt (exit codes {codes_text(codes)}): exit {code} is a "
                "worker's NOT_DELIVERED_EXIT_CODE, the trainer did not take the simulation's "
                "data or confirm its BYE (the worker's log says why), not a failure of the "
                "solver: look at the trainer (its log, its stop record). Said once per study.",
            )
            return
        if code == "timeout" and self._silent_ends.get(simulation_id, 0) >= 2:
            # (a start-up longer than its bound reads as a hang; max_restarts=0 alone
            # would redraw, and new parameters start as slowly: a user trial's C solver,
            # 25 s to load its mesh under simulation_timeout=10, was told only that)
            warn(
                logger,
                f"simulation {simulation_id} killed before its first message again on its "
                f"restart, as on its previous attempt (exit codes {codes_text(codes)}): its "
                "start-up may be longer than "
                "the launcher allows before a first message (the kill's line names the "
                "bound; after a resume, a simulation run again sends its first step "
                "at once, held by the "
                "checkpoint or not, as its first attempt did, then a held step as "
                "a sign of life each quarter of that bound; an earlier version's "
                "client may send nothing before its first step the checkpoint lacks), and "
                "every "
                "simulation starts "
                "as slowly. Run one simulation's "
                "command by hand and time it to its first send: a slow start-up needs "
                "LauncherTuning(startup_timeout=...) (with a numeric simulation_timeout, "
                "the start-up is then allowed the larger of the two); a solver that hangs "
                "in its set-up for these parameters only is given up at its first failure "
                "by LauncherTuning(max_restarts=0). Said once per study.",
            )
            return
        exit_code = f"exit {code_text(code)}" if isinstance(code, int) else code
        what = "hung again" if code == "timeout" else f"failed again ({exit_code})"
        sooner = self.hang_sooner.get(simulation_id, "") if code == "timeout" else ""
        warn(
            logger,
            f"simulation {simulation_id} {what} on its restart, as on its previous attempt "
            f"(exit codes {codes_text(codes)}): if the solver is deterministic, the same "
            f"parameters fail the same way and every restart costs as long again{sooner}. "
            f"{_deterministic_fix(code)} Said once per study.",
        )


def _deterministic_fix(code: int | str) -> str:
    """The fix for a failure that repeats: an exit code the solver chose names
    `LauncherTuning.final_exit_codes` (only that code is given up at once; others are
    still restarted); a timeout, a signal or no code, ``max_restarts=0``."""
    # (a code that carries a signal, 143 or -15, is no choice of the solver's)
    if isinstance(code, int) and 1 <= code <= 255 and code_signal(code) is None:
        return (
            f"If exit {code} means a failure that will repeat, "
            f"LauncherTuning(final_exit_codes=({code},)) gives such a simulation up at "
            f"once, other failures still restarted; LauncherTuning(max_restarts=0) gives "
            f"up at the first failure of any kind. Either way new parameters are drawn in "
            f"its place (on_failure='redraw', the default)."
        )
    return (
        "LauncherTuning(max_restarts=0) gives such a simulation up at its first failure "
        "and draws new parameters in its place (on_failure='redraw', the default)."
    )
