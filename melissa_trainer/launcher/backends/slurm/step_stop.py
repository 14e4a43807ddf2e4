"""The polite end of srun steps (`SrunSteps.kill_all`): SIGTERM to their tasks, one
grace for them all, then the end of what is left.

srun turns a SIGTERM of its own into a SIGKILL of its tasks ("srun: forcing job
termination", Slurm 22.05): signalling the srun process, as a local job is signalled,
gives a solver no grace to write a restart file. ``scancel --signal=TERM JOB.STEP``
instead signals the step's tasks and leaves the step running (seen on the one-node test
cluster: a task that ignores the signal goes on; one that exits 0 on it ends the step,
and srun then exits 0). So a stop sends one such scancel naming every step whose id
squeue has listed, waits up to the grace for their sruns to end, then signals the sruns
still running (their SIGKILL of the tasks), SIGKILLing them after `SRUN_END` s.

A step whose id is not known (srun just started: squeue has not listed its step, so no
task of it runs yet; or its step already ended) cannot be named: its srun is signalled
at once when no step is named, else with theirs after the grace (one `SRUN_END` for
all: signalled first, its own wait came before theirs, 2 x `SRUN_END` in all); when
the squeue just before the stop found the controller away, its tasks on this node are
found by its step name instead (`SLURM_JOB_NAME`) and ended as below. When
that scancel fails for the controller's absence or takes more than `TERM_WAIT` s
(a squeue then tells a frozen controller from a step daemon that does not answer,
`_controller_away`), this node's tasks of the named steps get their SIGTERM from the
stop itself, the whole grace from then, and SIGKILL for what is left
(`step_tasks.end_tasks`: a signalled srun does not end its tasks without the
controller, and its "forcing job termination" would give them no SIGTERM), then the
sruns are signalled, and, the controller away, the steps are not cancelled by name
afterwards (each squeue and scancel would wait out its timeout); a step daemon that
did not answer, the controller up, gets its own warning and the cancel by name.
Measured on the one-node test cluster, slurmctld SIGSTOPped, two steps whose ids were
known, grace 2 s, controller_wait 5 (stop_bound 17 s before, 22 s with `TERM_WAIT`),
one run each (an experiment script, not committed): the kill took 22.0 s before this
module (the cancel by name's squeue waited 20 s), 40.1 s with an unbounded scancel
--signal=TERM (20 s more), 15.0 s now (the scancel's 5 s, then the sruns, which did not
end while the controller was away, SIGKILLed after `SRUN_END`); 15.0 s with stop_bound
32 s (`SlurmBackend.stop_bound`'s srun figure) and this node's tasks SIGKILLed with no
SIGTERM; 17.0 s with their SIGTERM and the grace first (test_slurm_srun_frozen_stop.py,
one 2-task step, grace 2 s: the 2 s of grace added; the sruns still waited out
`SRUN_END` after their tasks' end). A scancel that timed out may be a step's
slurmstepd that does not answer, the controller up, and srun then ends on its own
within KillWait + 2 s and says why (tests/launcher/backends/test_slurm.py's "mute"
step: SIGKILLed at once, it said nothing): that srun keeps `SRUN_END`. Only with the
controller surely away (the probe's squeue unanswered too), one node, no unnamed step
and no task left here is the wait cut to `SRUN_GONE` (20.1 s -> 11.0 s, the same test,
one run each, stop_bound 37 s).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from melissa_trainer.launcher.backends.base import Handle
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands, failure, transient
from melissa_trainer.launcher.backends.slurm.step_tasks import (
    end_tasks,
    mute_elsewhere,
    one_node,
    step_tasks,
)
from melissa_trainer.launcher.log_lines import warn

if TYPE_CHECKING:  # (steps imports this module)
    from melissa_trainer.launcher.backends.slurm.srun_handle import SrunHandle

__all__ = ["PROBE_WAIT", "SRUN_END", "SRUN_GONE", "TERM_WAIT", "Stopped", "stop_steps"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: seconds an srun signalled after the grace has to end its step (it SIGKILLs the tasks
#: and waits up to KillWait + 2 s for their end) before it is SIGKILLed itself; the
#: batch mode's FORCE_WAIT, which `SlurmBackend.stop_bound` counts
SRUN_END = 10.0
#: seconds a signalled srun has, instead of `SRUN_END`, when the controller is surely
#: away (its scancel and the probe's squeue both failed so), the allocation has one node
#: and the stop's steps have no task left on it (`_end_here`): such an srun does not end
#: its step without the controller (nothing is left to end) and would only wait out
#: `SRUN_END` (on the test cluster, slurmctld frozen: the stop took 11.0 s, 20.1 s
#: with `SRUN_END`, one run each of test_slurm_srun_frozen_stop.py's first test)
SRUN_GONE = 1.0
#: seconds the ``scancel --signal=TERM`` may take: a controller slower than that is
#: taken for one that does not answer (a frozen one holds scancel 2 x MessageTimeout,
#: 20 s by default; an answering one takes a fraction of a second);
#: `SlurmBackend.stop_bound` counts it in mode "srun"
TERM_WAIT = 5.0
#: seconds the squeue that tells a frozen controller from a step daemon that does not
#: answer may take (`_controller_away`), after a ``scancel --signal=TERM`` that failed
#: for a `transient` reason; an answering controller takes a fraction of a second
PROBE_WAIT = 3.0
#: seconds between two looks at the sruns during the grace
LOOK_EVERY = 0.05


@dataclass
class Stopped:
    """What `stop_steps` did.

    Attributes:
        away: whether its scancel found the controller away (failed for a `transient`
            reason, its timeout included, and a squeue of the allocation failed so too:
            `_controller_away`); None: no scancel was run.
        mute: its scancel failed so but the controller answered that squeue: the steps'
            daemons (slurmstepd) did not answer it (a stuck or overloaded node); this
            node's tasks were then ended as with the controller away (`termed`, `killed`).
        termed: this node's task processes it SIGTERMed itself (controller away:
            `step_tasks.end_tasks`).
        killed: those of them (or of their children) it SIGKILLed after the grace.
    """

    away: bool | None = None
    mute: bool = False
    termed: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)


def stop_steps(
    local: LocalBackend,
    commands: SlurmCommands,
    allocation: str,
    steps: Sequence[SrunHandle],
    grace: float,
) -> Stopped:
    """End `steps` (the sruns of `local`, each running or ended) together: SIGTERM to the
    tasks of those that can be named (module docstring) and up to `grace` s for them
    all from the start of this call, then every srun signalled (`SRUN_END` s at most,
    together; their tasks' SIGKILL: srun's own). With no step named, the sruns are
    signalled at once, given what is left of the grace or `SRUN_END` s, whichever is
    longer. With the controller away (the scancel failed or timed out), this node's
    tasks of the named steps get SIGTERM, `grace` s and SIGKILL from here
    (`step_tasks.end_tasks`), then the sruns `SRUN_END` s; so too when only the steps'
    daemons did not answer (`Stopped.mute`). Blocks meanwhile: at most `TERM_WAIT` +
    `PROBE_WAIT` + `grace` + `GONE_WAIT` + `SRUN_END` s (and the reaping of SIGKILLed
    sruns); the caller cancels the steps by name afterwards (a step may outlive its
    srun) unless the controller was away."""
    started = time.monotonic()
    stopped = Stopped()
    named = [s for s in steps if s.step_id is not None and local.poll(s.process) is None]
    unnamed = [s for s in steps if s not in named and local.poll(s.process) is None]
    if named:  # (tried even after a failure: the hint may be stale, the wait is bounded)
        ids = [f"{allocation}.{step.step_id}" for step in named]
        result = commands.run([commands.path("scancel"), "--signal=TERM", *ids], timeout=TERM_WAIT)
        why = failure(result)
        if why is not None and transient(why):  # (nothing signalled: this node's tasks are)
            stopped.away = _controller_away(commands, allocation)
            stopped.mute = not stopped.away
            logger.warning(
                "scancel --signal=TERM %s: %s; %s",
                " ".join(ids),
                why,
                "the Slurm controller did not answer a squeue either"
                if stopped.away
                else "the Slurm controller answers a squeue: the steps' daemons (slurmstepd) "
                "did not answer it",
            )
            return _end_here(local, allocation, steps, named, unnamed, grace, stopped)
        stopped.away = False
        if why is not None:  # (also for a step that ended meanwhile: the others were)
            logger.info("scancel --signal=TERM %s: %s", " ".join(ids), why)
    elif unnamed and commands.unreachable:  # (the squeue just before found it away)
        # (never listed: srun's SIGTERM would end their tasks through the controller)
        stopped.away = True
        return _end_here(local, allocation, steps, named, unnamed, grace, stopped)
    others: list[Handle] = [s.process for s in steps if s not in named]
    if not named:  # (nothing has a grace: the sruns are signalled at once)
        # (a SIGTERMed srun ends its tasks itself: SRUN_END at least, not an srun
        # SIGKILLed at once, its tasks left running under slurmstepd)
        left = max(grace - (time.monotonic() - started), 0.0)
        local.kill_all(others, max(left, SRUN_END))
        return stopped
    # (the others' sruns are signalled with the named ones' after the grace, all given
    # one SRUN_END: signalled at once, their wait came before the named ones' own and
    # the stop took 2 x SRUN_END; a task of theirs that starts meanwhile gets srun's
    # SIGKILL either way)
    deadline = started + max(grace, 0.0)
    waiting = [s.process for s in named]
    while waiting and time.monotonic() < deadline:
        waiting = [process for process in waiting if local.poll(process) is None]
        if waiting:
            time.sleep(min(LOOK_EVERY, max(deadline - time.monotonic(), 0.0)))
    local.kill_all([*others, *(s.process for s in named)], SRUN_END)
    return stopped


def _controller_away(commands: SlurmCommands, allocation: str) -> bool:
    """Whether the controller is away: a ``squeue`` of the job `allocation`, which asks
    slurmctld alone (no slurmd, no slurmstepd), fails for a `transient` reason or takes
    more than `PROBE_WAIT` s. (A scancel --signal=TERM times out for a step daemon that
    does not answer as it does for a frozen controller: the one-node test cluster, a
    step's slurmstepd SIGSTOPped, the controller up; test_slurm_srun_mute_stepd.py.)"""
    argv = [commands.path("squeue"), "-h", "-j", allocation, "-o", "%i"]
    why = failure(commands.run(argv, timeout=PROBE_WAIT))
    return why is not None and transient(why)


def _end_here(
    local: LocalBackend,
    allocation: str,
    steps: Sequence[SrunHandle],
    named: Sequence[SrunHandle],
    unnamed: Sequence[SrunHandle],
    grace: float,
    stopped: Stopped,
) -> Stopped:
    """The controller away: this node's tasks of the steps (`named` by id, `unnamed`, whose
    id was never listed, by name) get SIGTERM, `grace` s and SIGKILL from here
    (`step_tasks.end_tasks`), then the sruns of `steps` are signalled; `stopped` filled."""
    # (their sruns, signalled, would not end them without the controller; the grace
    # starts from their SIGTERM, not the stop's start: the scancel's TERM_WAIT may have
    # spent it; stop_bound counts both)
    step_ids = [s.step_id for s in named if s.step_id is not None]
    names = [s.step_name for s in unnamed]
    # (the named steps with no task here ran on other nodes only: the mute warning
    # names them; looked up before their tasks here are ended, which empties the rest)
    none_here = [
        s.step_name
        for s in named
        if stopped.mute and s.step_id is not None and not step_tasks(allocation, [s.step_id])
    ]
    stopped.termed, stopped.killed = end_tasks(allocation, step_ids, grace, names)
    # (an srun keeps SRUN_END, even with its tasks here gone, unless the controller is
    # surely away: a timed-out scancel may be a step daemon that does not answer, the
    # controller up (`stopped.mute`), and such an srun ends on its own within KillWait +
    # 2 s, saying why; SIGKILLed at once it says nothing. An unnamed step's srun may
    # still be starting its tasks; on several nodes, the others' tasks are ended by srun
    # if the controller answers meanwhile. A frozen controller's sruns do not end in
    # SRUN_END: test_slurm_srun_frozen_stop.py)
    wait = SRUN_END
    if stopped.away and not unnamed and one_node() and not step_tasks(allocation, step_ids):
        wait = SRUN_GONE
    local.kill_all([s.process for s in steps], wait)
    if stopped.mute:  # (the caller's warning is for a controller away; it cancels these)
        warn(
            logger,
            "the Slurm controller answers but the daemons (slurmstepd) of steps "
            f"{sorted(s.step_name for s in named)} did not answer their scancel "
            f"--signal=TERM: on this node, {len(stopped.termed)} task process(es) got "
            f"SIGTERM and the grace, {len(stopped.killed)} SIGKILLed; their sruns were "
            "signalled (one that hears of no task's end says so in the job's log, after "
            f"KillWait + 2 s); the steps are cancelled by name; {mute_elsewhere(none_here)}",
        )
    return stopped
