"""What a closing client is told of a trainer that stopped, and the errors it raises
(`melissa_trainer.client.stopped`, which composes them from a stop record): the words
the C client says too (clients/c/src/stop_said.c), and the kinds of `TrainerStopped`
that a close and a blocked send raise alike."""

from __future__ import annotations

from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.send_errors import StoppedForGood

__all__ = [
    "ENDED",
    "NOT_NEEDED",
    "RESUMABLE_WORDS",
    "TAKEN_RESUME",
    "NotNeededWhileSending",
    "RefusedWhileSending",
    "SimulationNotNeeded",
    "StoppedWhileSending",
]

#: what a close says of a trainer whose record's code is resumable (`RESUMABLE`): the
#: C client's words too (clients/c/src/stop_said.c)
RESUMABLE_WORDS = {
    "preempted": "the trainer was preempted",
    "broken": "the trainer stopped on a broken collective, a resume may follow",
    # (``restarts_left`` > 0: the launcher restarts the failed run; {n}: how many left)
    "error": "the trainer failed and its launcher restarts it: a restart is expected ({n} left)",
}
#: the opening of what a simulation the study ended without is told
NOT_NEEDED = "the study ended without needing this simulation"
#: what a simulation whose run ended normally (``end``: max_steps, end of stream, a
#: hook) before it read its BYE is told instead of the resume advice of a failure. An
#: end on max_steps is not final: a trainer resumed with a larger --max_steps trains on
#: (`checkpoint.registry`'s advice), and takes the steps it lacks; an end of stream or
#: a hook's stop is. The record says which only in its reason's sentence, so both, each
#: with its condition. The C client's words too (clients/c/src/stop_said.c)
ENDED = (
    "The run ended, so the rest of this simulation was not needed, and not taken. If it "
    'ended on max_steps (its reason: "max_steps N reached"), a trainer resumed from its '
    "last checkpoint with a larger --max_steps trains on: run this simulation again then, "
    "with the same simulation id, to have the rest of it trained on. If it ended at its "
    "stream's end or on a hook's stop, nothing is to be resumed or run again for this run"
)

#: what a simulation whose run ended (``end``) before it read its BYE, every step sent
#: taken, is told of a resume: a trainer resumed from that run's checkpoint lacks the
#: BYE (`assembly.StepLedger.byes`, saved unfinished; or lacks the simulation, begun
#: after the checkpoint): given expected_simulations its stream ends only once
#: simulations_finished + abandoned reach it (`IngestState.check_expected`); the steps
#: its checkpoint holds are dropped as duplicates of a rerun. The C client's words too
#: (clients/c/src/stop_said.c)
TAKEN_RESUME = (
    "If that run is resumed (a larger --max_steps) with expected_simulations, its stream "
    "waits for this BYE: then {rerun}"
)


class SimulationNotNeeded(TrainerStopped):
    """A close whose trainer ended, its ``expected_simulations`` reached, without this
    simulation (more solvers started than it was given): nothing failed, but not all
    of this simulation was trained on (the message says how much was), so the close
    does not return as confirmed. Uncaught, the solver exits 1; a script that starts
    spare solvers on purpose catches it (docs/how-to/own-solver.md). A `TrainerStopped`,
    so a `TimeoutError`, as this close's error was before."""


# What a blocked send raises (`send_wait.StoppedForGood.of`), per kind of stop: also the
# close's error of that kind (`StopSaid.error`), so that one ``except`` catches both (a
# spare solver's ``except SimulationNotNeeded`` missed a send's plain StoppedForGood and
# it exited 1). Made once, here, where each `StopSaid` is made.


class NotNeededWhileSending(StoppedForGood, SimulationNotNeeded):
    """A blocked send gave up: the study ended without this simulation (a
    `SimulationNotNeeded` and a `send_wait.StoppedForGood`)."""


class RefusedWhileSending(StoppedForGood, SimulationRefused):
    """A blocked send gave up: this simulation's non-finite sample stopped the trainer (a
    `SimulationRefused`, so a ValueError, and a `send_wait.StoppedForGood`)."""


class StoppedWhileSending(StoppedForGood, TrainerStopped):
    """A blocked send gave up: the trainer ended or failed otherwise (a `TrainerStopped`
    and a `send_wait.StoppedForGood`)."""
