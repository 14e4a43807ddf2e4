"""`RerunSkip`: a simulation the launcher runs again sends only the time steps its
receivers' checkpoint lacks.

A resumed study runs again each simulation that was running at the checkpoint, or whose
data a rank's checkpoint lacks (`StudyRecord.reconcile`). The solver computes every
step again, but the receivers hold some (often all: a simulation killed after its last
step, before its BYE) and used to drop each one sent again as a duplicate: correct, and
wasted work (a heat resume re-sent 100 such steps). So a launched attempt after the
first (``MELISSA_TRAINER_ATTEMPT`` > 0: the launcher counts from 0), or a worker's
simulation given again (`worker.given_attempt` > 0: the launcher's answer to the
worker carries the attempt), its endpoints from a rendezvous, asks each receiver at
its first send which of its steps the receiver holds (HELD_QUERY on the follow socket,
docs/protocol.md section 17; `follow.Follower.held`): the record the receiver loaded
from its checkpoint. A step its receiver holds is then not sent; it is
counted in that receiver's BYE (`Transport.steps`), as after a follow, so that the
receiver finds the simulation complete.

Only an optimisation: the answer is asked once, with a short bound (`ASK_TIMEOUT`); a
receiver without a follow socket (an older trainer), a rendezvous of another run than
the client's, or no answer in time: everything is sent, as before (logged at INFO).
A first attempt asks nothing (nothing of it can be held). Not thread-safe: the
client's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from melissa_trainer.client.config import check_attempt
from melissa_trainer.client.follow import Follower, FollowError
from melissa_trainer.client.worker_given import given_attempt
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire import HELD_FINISHED, HELD_STEPS, HeldReply
from melissa_trainer.wire.routing import receiver_of

__all__ = ["ASK_TIMEOUT", "RerunSkip", "attempt", "rerun_skip"]

logger = logging.getLogger("melissa_trainer.client")

#: seconds a rerun waits for each receiver's HELD before it sends every step
ASK_TIMEOUT = 5.0


def attempt(simulation_id: int | None = None) -> int:
    """This launched simulation's attempt (``$MELISSA_TRAINER_ATTEMPT``, 0 the first:
    `config.check_attempt`, which `Client` ran at its start), else, in a worker, the
    attempt the launcher gave `simulation_id` (`worker.given_attempt`); -1 when neither."""
    launched_attempt = check_attempt()
    if launched_attempt >= 0:
        return launched_attempt
    given = None if simulation_id is None else given_attempt(simulation_id)
    return -1 if given is None else given


class RerunSkip:
    """Which steps a rerun skips: those `replies` (each receiver's HELD, rank order) say
    held; each skipped step is added to its receiver's `steps` (its BYE's count)."""

    def __init__(
        self,
        replies: Sequence[HeldReply],
        simulation_id: int,
        routing: str | None,
        steps: list[StepSet],
    ) -> None:
        self.replies, self.simulation_id, self.routing = list(replies), simulation_id, routing
        self.steps = steps
        #: steps not sent, held already
        self.skipped = 0

    def __call__(self, step: int) -> bool:
        """Whether `step` is held by its receiver: then it is counted, not sent."""
        rank = receiver_of(self.simulation_id, step, len(self.replies), self.routing)
        if not self.replies[rank].holds(step, self.routing):
            return False
        self.steps[rank].add(step)
        self.skipped += 1
        return True


def rerun_skip(
    rendezvous: str | None,
    simulation_id: int,
    routing: str | None,
    endpoints: Sequence[str],
    steps: list[StepSet],
) -> RerunSkip | None:
    """The skip of a launched rerun whose endpoints came from `rendezvous` (module
    docstring), asking each receiver once; None when there is nothing to skip (a first
    attempt, not launched, no rendezvous, receivers that hold nothing of it or cannot
    be asked: then every step is sent)."""
    if rendezvous is None or attempt(simulation_id) < 1:
        return None
    try:
        entries = fetch_rendezvous(rendezvous, timeout=0.0)
        if [str(e["endpoint"]) for e in entries] != list(endpoints):
            raise FollowError("the rendezvous names other receivers than the client's")
        replies = Follower(rendezvous, simulation_id, None, endpoints).held(entries, ASK_TIMEOUT)
    except (FollowError, TimeoutError, OSError, KeyError) as exc:  # (sends all: as before)
        logger.info(
            "simulation %d (attempt %d): could not ask its receivers which steps they hold "
            "(%s): it sends every step, their duplicates dropped",
            simulation_id,
            attempt(simulation_id),
            exc,
        )
        return None
    if not any(r.status in (HELD_STEPS, HELD_FINISHED) for r in replies):
        return None
    return RerunSkip(replies, simulation_id, routing, steps)
