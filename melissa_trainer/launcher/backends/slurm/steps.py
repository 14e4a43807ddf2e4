"""Mode "srun" of `SlurmBackend`: each job an ``srun`` step of the current allocation.

The trainer runs inside an allocation (``salloc``, or a batch job). Each job is ``srun
--ntasks=N --exclusive --job-name=NAME ...`` (`script.srun_command`) run as a
local process by `LocalBackend`: same process group and PR_SET_PDEATHSIG, so steps
die with the trainer and with the allocation. A kill gives the step's tasks their
SIGTERM with ``scancel --signal=TERM`` and a grace (`step_stop`: srun would turn a
SIGTERM of its own into a SIGKILL of its tasks), then signals the srun process; the
step is also ``scancel``-ed by name, in case the srun process was killed before it
could end its tasks.

A step this backend killed never reports success. srun's exit status is its tasks'
(the highest exit code, or 128 + the signal that ended one): a task that exits 0 on
its SIGTERM makes it 0, and srun turns the SIGTERM of a kill into a SIGKILL of its
tasks ("forcing job termination"), which normally reports 137. But srun waits only a
few seconds (KillWait + 2) for the tasks' exit to be reported; past that ("Timed out
waiting for job step to complete": a slurmstepd slow to answer, on a loaded node, or a
step aborted before its launch was complete) it exits with 0, having heard of no task.
That 0 says nothing about the job: `poll` reports `KILLED` for it instead.
Nor does a step whose node failed: srun says "Node failure on n1" and exits 0 (two
nodes, one lost); `poll` reports `step_end.LOST_CODE` for it (`step_end.node_failure`).

MPICH segments. A step whose ranks end without ``MPI_Finalize`` (killed, crashed) leaves
its node's file in /dev/shm (`mpich_segments`), named after the step's PMI key-value
space ``<allocation>.<step id>`` under ``srun --mpi=pmi2``. The ranks run under
slurmstepd, not below srun, so the local watch of the srun process finds nothing; the
step's id is learnt from ``squeue --steps`` by the step's name (listed from its creation
by slurmctld, before any task starts, until it completes; asked at most every
`LIST_EVERY` s while a step's id is unknown, and before a kill). Once the step has ended
(`poll` sees srun's end, `kill`, `close`), the files of that name that are ours and
unheld are removed, those still held retried by later polls (`step_sweeps`: also how a
step that ended before squeue listed it is swept).

Why squeue: sacct needs accounting (often off, and off in the test cluster); ``srun
--verbose`` writes its lines into the job's log, which users read and `exit_cause`
parses; a rank's ``SLURM_STEP_ID`` is readable only on a node where a rank runs and
while it lives (a crash right after ``MPI_Init`` leaves nothing to read).

Only this node's /dev/shm can be swept: the files that a step leaves on the other nodes
of the allocation are for Slurm's epilog, or the user, to remove (docs/how-to/slurm.md).
Another MPI, or MPICH without pmi2, names no file so: nothing is removed then.

A controller outage. An srun that cannot reach slurmctld exits 1 within its
MessageTimeout, having run no task: it says so in the job's log ("srun: error: Unable
to confirm allocation for job N: Unable to contact slurm controller (connect failure)",
"Socket timed out on send/recv operation" for a frozen one; "Unable to create step for
job N: ..." at the step's creation: Slurm 22.05, the test cluster). Such an end (exit
1, one of `srun_log.BEFORE_TASKS` with a `transient` reason in what srun wrote to the
log since its start) is not the job's: `poll` reports the step running and runs srun again, with
backoff (1 s, doubling to 15 s), for up to `controller_wait` s from the first such end,
once ``squeue --steps`` answers (the controller is back), having cancelled any step of
that name it lists (the lost reply of a creation leaves a step with no task, holding
its ``--exclusive`` CPUs). Any other end, a task's exit 1 included, is the step's: never
run again here. A job without a log (srun's stderr is then the trainer's) is not
retried.

Used from the backend's one thread.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence

from melissa_trainer.launcher.backends.base import Job, LaunchError, unbuffered_outputs
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss
from melissa_trainer.launcher.backends.slurm.batch import CLOSE_GRACE
from melissa_trainer.launcher.backends.slurm.commands import (
    COMMAND_TIMEOUT,
    SlurmCommands,
    failure,
    transient,
)
from melissa_trainer.launcher.backends.slurm.srun_handle import SrunHandle
from melissa_trainer.launcher.backends.slurm.srun_log import before_tasks, log_size
from melissa_trainer.launcher.backends.slurm.step_end import (
    LOST_CODE,
    allocation_ended,
    node_failure,
    said_end,
)
from melissa_trainer.launcher.backends.slurm.step_stop import TERM_WAIT, Stopped, stop_steps
from melissa_trainer.launcher.backends.slurm.step_sweeps import StepSweeps
from melissa_trainer.launcher.backends.slurm.step_tasks import elsewhere, kill_tasks
from melissa_trainer.launcher.log_lines import warn

__all__ = ["SrunSteps"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: what `SrunSteps.poll` reports for a step it killed whose srun exited with 0 (see the
#: module docstring): srun's own code for tasks it ended with SIGKILL
KILLED = 128 + signal.SIGKILL
#: seconds between two ``squeue --steps`` while a running step's id is unknown (each
#: asks slurmctld: at most one a second per trainer)
LIST_EVERY = 1.0


class SrunSteps:
    """The steps of one backend in the allocation `allocation` (its job id)."""

    def __init__(
        self,
        commands: SlurmCommands,
        allocation: str,
        time_limit: str | None,
        srun_args: Sequence[str],
    ) -> None:
        self._commands, self._allocation = commands, allocation
        self._time_limit, self._srun_args = time_limit, tuple(srun_args)
        # srun passes its environment on to the step's tasks, on nodes where the trainer
        # is not: the srun process is started as the trainer is, nothing changed
        self._local = LocalBackend(placement=None)
        self.running: list[SrunHandle] = []  # steps not known ended (`close`: its lines)
        self._top = -1  # the highest step id of the allocation listed so far
        self._listed = -LIST_EVERY  # when the steps were last listed (monotonic)
        self._sweeps = StepSweeps(allocation)  # (the MPICH files of ended steps)
        #: why no step can start any more: the allocation has ended (`allocation_ended`)
        self.ended: str | None = None

    def launch(self, job: Job, step_name: str) -> SrunHandle:
        """Start the srun process of `job`, its step named `step_name`; at once.
        LaunchError once a step's srun said the allocation has ended (`ended`)."""
        if self.ended is not None:
            raise LaunchError(self.ended)
        argv = ss.srun_command(
            name=step_name,
            argv=job.argv,
            ranks=job.ranks,
            time_limit=self._time_limit,
            srun_args=self._srun_args,
            srun=self._commands.path("srun"),
        )
        # the local backend sees one process (srun), which starts the ranks itself
        env = unbuffered_outputs(job.env, os.environ)  # (Python, gfortran: unbuffered)
        srun_job = dataclasses.replace(job, argv=argv, ranks=1, env=env)
        log_from = log_size(job)
        process = self._local.launch(srun_job)
        step = SrunHandle(
            job=job, process=process, step_name=step_name, floor=self._top + 1, log_from=log_from
        )
        self.running.append(step)
        return step

    def poll(self, step: SrunHandle) -> int | None:
        """None while srun runs, else its exit code; `KILLED` for a step that `kill`
        ended whose srun exited with 0 (it heard of no task's end: module docstring)."""
        over = False  # its outage's retries are over: srun's last code is the step's
        if step.retry_at is not None:
            if self._ride_out(step):
                return None
            over = True
        code = self._local.poll(step.process)
        if code is not None and step in self.running and not over and self._outage(step, code):
            return None
        due = time.monotonic() - self._listed >= LIST_EVERY
        if code is None and step.step_id is None and due:
            self._list(warn=False)  # (a failure, said at each try, would flood the log)
        if code is not None and step in self.running:
            self.running.remove(step)
            self._sweeps.sweep(step, self._top)
            if not step.killed:  # (Slurm's end of it, said: `step_end`)
                step.lost = node_failure(step.job, self.describe(step), step.log_from)
            if code != 0 and not step.killed and step.lost is None:
                said_end(step.job, self.describe(step), step.log_from, self._time_limit)
            if code != 0 and not step.killed and self.ended is None:
                self.ended = allocation_ended(step.job, step.log_from, self._allocation)
        self._sweeps.retry()
        if code == 0 and step.killed:
            return KILLED
        if code == 0 and step.lost is not None:  # (srun's 0 after a node's failure)
            return LOST_CODE
        return code

    def kill(self, step: SrunHandle, grace: float) -> int | None:
        """End a running step: SIGTERM to its tasks, the grace, its srun signalled
        (`step_stop`), then ``scancel`` of the step by name.
        srun's exit code if it had ended on its own before the kill's signal (the local
        poll just before it), else None: what srun says after a kill is no news of the
        job (module docstring: 137, or 0 having heard of no task), so a step that ends
        in the instant between that poll and the signal counts as killed."""
        return self.kill_all([step], grace)[0]

    def kill_all(self, steps: list[SrunHandle], grace: float) -> list[int | None]:
        """`kill` of each of `steps`, their graces together: SIGTERM to their tasks at
        once, one `grace` for them all, then their sruns signalled (`step_stop`), then
        one ``scancel`` naming their steps. Results in order."""
        running = [step for step in steps if step in self.running]
        away = self._list_before_stop(running)  # (while they are among the running)
        for step in running:  # (still running: a step may outlive its srun)
            self.running.remove(step)
            # (an srun that had ended on its own keeps its code: it was not killed; one
            # waiting out an outage ran nothing: killed)
            waiting, step.retry_at = step.retry_at is not None, None
            step.killed = waiting or self._local.poll(step.process) is None
        if running:
            stopped = stop_steps(self._local, self._commands, self._allocation, running, grace)
            self._cancel_unless_away(running, away, stopped)
            for step in running:
                self._sweeps.sweep(step, self._top)
        return [None if step.killed else self._local.poll(step.process) for step in steps]

    def close(self) -> None:
        """Kill every running step (as `kill_all`, with `CLOSE_GRACE`); sweep the
        segments of all (`step_sweeps`: those still held by ranks that are ending are retried
        once, after the kills)."""
        away = self._list_before_stop(self.running)
        running, self.running = self.running, []
        stopped = stop_steps(self._local, self._commands, self._allocation, running, CLOSE_GRACE)
        self._local.close()
        self._cancel_unless_away(running, away, stopped)
        for step in running:
            self._sweeps.sweep(step, self._top)
        self._sweeps.last_retry()

    def describe(self, step: SrunHandle) -> str:
        return f"{self._local.describe(step.process)} (srun step {step.step_name})"

    def cancel(self, match: Callable[[str], bool], timeout: float = COMMAND_TIMEOUT) -> None:
        """scancel the steps of the allocation whose name `match`-es, logging them; the
        squeue and the scancel each given up after `timeout` s."""
        listed = self._list(timeout=timeout)
        if listed is None:
            return
        steps = [step_id for step_id, name in listed.items() if match(name) and "." in step_id]
        if steps:
            logger.info(
                "cancelling steps (of killed srun processes, or of an earlier run): %s", steps
            )
            self._commands.run([self._commands.path("scancel"), *steps], timeout=timeout)

    def _list_before_stop(self, steps: Sequence[SrunHandle]) -> bool | None:
        """Before a stop of `steps`: list the allocation's steps if one's id is unknown,
        given up after `TERM_WAIT` (a stop's commands are bounded so:
        `SlurmBackend.stop_bound`). Whether the controller was away; None: not asked."""
        if not any(step.step_id is None for step in steps):
            return None
        self._list(timeout=TERM_WAIT)
        return self._commands.unreachable

    def _cancel_unless_away(
        self, steps: Sequence[SrunHandle], listed_away: bool | None, stopped: Stopped
    ) -> None:
        """`cancel` `steps` by name after their kill (its squeue and scancel given up
        after `TERM_WAIT` each), unless the stop's last command found the controller
        away (`stopped.away`, else `listed_away`: the squeue before the stop's): then
        their tasks left on this node are SIGKILLed (`step_tasks`: srun's own end of
        them needs the controller; those the stop's SIGTERM and grace reached are in
        `stopped`) and a warning says what was done and what is left. Neither command
        run: they are cancelled; an earlier command's unreachability is no news of the
        controller now."""
        names = {step.step_name for step in steps}
        away = listed_away if stopped.away is None else stopped.away
        if names and away:
            ids = {step.step_id for step in steps if step.step_id is not None}
            # (a set: a task SIGKILLed by the stop but not yet gone, in uninterruptible
            # I/O past GONE_WAIT, is found and SIGKILLed again here; one process, once)
            killed = {*stopped.killed, *kill_tasks(self._allocation, ids, names)}
            warn(
                logger,
                f"the Slurm controller did not answer: steps {sorted(names)} are not "
                "cancelled by name; their sruns were signalled, which does not end their "
                f"tasks without the controller: on this node, {len(stopped.termed)} task "
                f"process(es) got SIGTERM and the grace, {len(killed)} SIGKILLed (left after "
                f"it, or started since: no SIGTERM); {elsewhere()}",
            )
        elif names:
            self.cancel(names.__contains__, timeout=TERM_WAIT)

    def _list(self, warn: bool = True, timeout: float = COMMAND_TIMEOUT) -> dict[str, str] | None:
        """The allocation's steps (``squeue --steps``, given up after `timeout` s): id ->
        name; None if squeue fails (said in a warning, or at debug level unless `warn`).
        Notes the ids of the running steps by their names."""
        self._listed = time.monotonic()
        squeue = self._commands.path("squeue")
        argv = [squeue, "-h", "-s", "-j", self._allocation, "-o", "%i|%j"]
        result = self._commands.run(argv, timeout=timeout)
        why = failure(result)
        if why is not None or isinstance(result, str):
            level = logging.WARNING if warn else logging.DEBUG
            logger.log(level, "cannot list the steps of job %s: %s", self._allocation, why)
            return None
        listed = sq.parse_squeue(result.stdout)
        ids: dict[str, int] = {}
        for step_id, name in listed.items():
            job_id, _, number = step_id.partition(".")
            if job_id == self._allocation and number.isdigit():
                self._top = max(self._top, int(number))
                ids[name] = max(ids.get(name, -1), int(number))  # (the newest of a name)
        for step in self.running:
            if step.step_id is None and ids.get(step.step_name, -1) >= step.floor:
                step.step_id = ids[step.step_name]
        return listed

    def _outage(self, step: SrunHandle, code: int) -> bool:
        """Whether srun's end (`code`) is its failure to reach the controller before any
        task (module docstring) with time left to run it again: then its next run is
        set (`retry_at`). The first such end and the last are said in WARNINGs."""
        why = before_tasks(step) if code == 1 and not step.killed else None
        if why is None or not transient(why) or self._commands.controller_wait <= 0:
            return False
        wait = self._commands.controller_wait
        now = self._commands.clock()
        if step.outage is None:
            step.outage = (now, now + wait)
            logger.warning(
                "%s: srun could not reach the Slurm controller (%s): running it again for up "
                "to %g s (controller_wait)",
                self.describe(step),
                why,
                wait,
            )
        until = step.outage[1]
        if now >= until:
            self._over(step, now)
            return False
        step.retry_at, step.delay = now + min(step.delay, until - now), min(2 * step.delay, 15.0)
        return True

    def _over(self, step: SrunHandle, now: float) -> None:
        """Say that `step`'s outage outlasted `controller_wait`: it fails."""
        assert step.outage is not None
        step.retry_at = None
        warn(
            logger,
            f"{self.describe(step)}: the Slurm controller was unreachable for "
            f"{now - step.outage[0]:.0f} s ({step.tries} srun tries; controller_wait sets how "
            "long they are retried): the step failed",
        )

    def _ride_out(self, step: SrunHandle) -> bool:
        """For a step waiting out an outage: run srun again when due and squeue answers
        (any step of its name, an orphan of a lost reply, cancelled first). Whether the
        step goes on (waiting, or srun started again); False: its retries are over (it
        fails with its last srun's code)."""
        assert step.retry_at is not None and step.outage is not None
        now = self._commands.clock()
        if now < step.retry_at:
            return True
        listed = self._list(warn=False)
        if listed is None:  # (the controller cannot answer squeue either)
            if now >= step.outage[1]:
                self._over(step, now)
                return False
            step.retry_at = now + min(step.delay, step.outage[1] - now)
            step.delay = min(2 * step.delay, 15.0)
            return True
        orphans = [i for i, name in listed.items() if name == step.step_name and "." in i]
        if orphans:
            logger.info(
                "%s: cancelling its steps without srun (a lost reply): %s",
                self.describe(step),
                orphans,
            )
            self._commands.run([self._commands.path("scancel"), *orphans])
        step.retry_at, step.log_from = None, log_size(step.job)
        step.step_id, step.floor = None, self._top + 1  # (the new srun's step: not listed yet)
        step.process, step.tries = self._local.launch(step.process.job), step.tries + 1
        logger.warning(
            "%s: srun runs again after %.0f s (try %d): the Slurm controller answers",
            self.describe(step),
            now - step.outage[0],
            step.tries,
        )
        return True
