"""The end of a study, rank 0's: the wait for its last simulations to exit once its
stream has ended (`LastExits`), the stream found waiting for a study that has ended
(`waiting_forever`), and the end-of-run account (`log_study_account`).

At the end of the stream every simulation's data is in, but the last processes may still
be exiting (a solver writing its own output after its last send). The launcher records a
simulation finished once it sees its process end, so the figures read before that say
``launcher_finished 9 | launcher_running 1`` beside ``simulations_finished 10``. The study
waits for those exits at LOOP_END, before the final log and checkpoint (`Study.on_loop_end`),
and its `stop` waits only for what time is left of the same bound: one wait in all, never
two. A stop before the stream's end (max_steps, a hook) kills the simulations still
running, after the final log counted them running: the account then says so
(`LastExits.stopped_lines`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.account import SimulationOutcome, log_account, stopped_line
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.study.every_rank import EveryRankReport
from melissa_trainer.study.feedback import FeedbackCheck

__all__ = ["LastExits", "check_waiting", "log_study_account", "waiting_forever"]

logger = logging.getLogger(__name__)


class LastExits:
    """A bound on the wait for the last simulations' exits, shared by its waits: it
    starts at the first (`left`, `wait`) and holds for the run. Training thread only."""

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._stopped: list[int] = []  # (`stop`: those it killed while they ran)
        self._saved: list[SimulationOutcome] | None = None  # (`stop`: the checkpoint's)

    def left(self, seconds: float) -> float:
        """Seconds left of a bound of `seconds` (starting it now if not started)."""
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + seconds
            return seconds  # (exactly: the deadline's float sum need not give it back)
        return max(0.0, self._deadline - now)

    def wait(self, launcher: Launcher, seconds: float) -> bool:
        """Wait, within the bound of `seconds`, until `launcher` has no job alive and no
        exited one whose data is due (it has seen every exit); True once it has. False at
        the bound, or at once when the launcher's thread stopped on an error (it logged
        it; `Study.stop` and `Launcher.check` tell the rest)."""
        poll = min(launcher.tuning.poll_interval, 0.05)
        while True:
            summary = launcher.summary()
            if summary["running"] + summary["exited"] == 0:
                return True
            try:
                launcher.check()
            except LauncherError:
                return False
            left = self.left(seconds)
            if left <= 0.0:
                return False
            time.sleep(min(poll, left))  # (the launcher's thread polls the processes)

    def stop(
        self, launcher: Launcher, seconds: float, closing: bool, told: Callable[[], None] | None
    ) -> None:
        """`launcher.stop`, after what is left of the bound of `seconds` when `closing`
        (the stream has ended), else at once; `told` is its `before_kill`. Notes the
        simulations it killed while they ran (pending again: `stopped_lines`)."""

        def before_kill() -> None:
            self._stopped = [o.simulation_id for o in launcher.outcomes() if o.status == "running"]
            if told is not None:
                told()

        launcher.stop(wait=self.left(seconds) if closing else 0.0, before_kill=before_kill)
        again = {o.simulation_id for o in launcher.outcomes() if o.status == "pending"}
        self._stopped = [sid for sid in self._stopped if sid in again]  # (not those ended)
        self._saved = launcher.saved_outcomes  # (what a resume runs again: `stopped_line`)

    def stopped_lines(self) -> list[str]:
        """The account's line, logged, on the simulations `stop` killed as they ran (a
        stop before the stream's end: max_steps, a hook, an error, a preemption): the
        final log, before that stop, counted them running; none: no line."""
        if not self._stopped:
            return []
        line = stopped_line(self._stopped, self._saved)
        logger.info("%s", line)
        return [line]


def check_waiting(
    launcher: Launcher, receiver: Receiver, rank: int, expected: int | None, grace: float
) -> None:
    """Rank 0 (its launcher started): raise `waiting_forever`'s error when every
    simulation of the study has ended, yet the stream still waits, silent `grace` s.
    (The other ranks learn the study's end from rank 0: `end_notice`.)

    Raises:
        SourceError: as said.
    """
    if (
        receiver.ended
        or receiver.idle_seconds() <= grace  # (cheap first: done reads the study)
        or not launcher.done
    ):
        return
    raise waiting_forever(launcher, receiver, rank, expected)


def waiting_forever(
    launcher: Launcher, receiver: Receiver, rank: int, expected: int | None
) -> SourceError:
    """The error of a stream (rank `rank`'s, of `expected` simulations) that still waits
    when every simulation of the study has ended: the simulations it waits for, each as
    the launcher and the receiver have it (8 at most)."""
    waiting = receiver.waiting_for()
    described = "; ".join(f"{launcher.describe(s)}, {receiver.describe(s)}" for s in waiting[:8])
    figures = receiver.telemetry()
    return SourceError(
        f"every simulation of the study has ended, but the stream of rank "
        f"{rank} still waits ({figures['simulations_finished']:.0f} of "
        f"{expected} expected simulations finished, "
        f"{figures['simulations_abandoned']:.0f} abandoned): "
        f"{described or 'no simulation it knows is unfinished'}"
    )


def log_study_account(
    launcher: Launcher,
    receiver: Receiver | None,
    feedback: FeedbackCheck,
    every_rank: EveryRankReport | None = None,
) -> list[str]:
    """Log the study's end-of-run account (`launcher.account.log_account`: what each
    simulation contributed, as every rank's receiver counted it (`every_rank`: rank 0's
    `receiver` and the other ranks' hand-off, their last words waited for, bounded; None:
    rank 0's alone), with the first step each had refused over every rank, of the study's
    `n_simulations`; what the sampler drew; `feedback`'s lines on losses that came too
    late to steer). Returns its lines when they were an INFO (`Study.account_report`,
    which `ProgressHook` prints), else none (a WARNING: logged already)."""
    if every_rank is not None:
        every_rank.final_words()  # (their last steps: `stream.rank_activity`)
        samples, first = every_rank.samples_of(), every_rank.first_refused()
    else:
        samples = receiver.ingest.samples_of() if receiver else {}
        first = dict(receiver.ingest.nonfinite.first_step) if receiver else {}
    sampler = launcher.sampler
    late = feedback.lines(sampler)  # (none or few steered: a WARNING)
    lines, warned = log_account(
        launcher.outcomes(),
        samples,
        sampler,
        late,
        launcher.n_simulations,
        first,
        draws=launcher.draws_path,
    )
    return [] if warned else lines
