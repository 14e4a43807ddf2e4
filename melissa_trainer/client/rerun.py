"""`RerunSkip`: a simulation the launcher runs again sends only the time steps its
receivers' checkpoint lacks.

A resumed study runs again each simulation that was running at the checkpoint, or whose
data a rank's checkpoint lacks (`StudyRecord.reconcile`). The solver computes every
step again, but the receivers hold some (often all: a simulation killed after its last
step, before its BYE) and used to drop each one sent again as a duplicate: correct, and
wasted work (a heat resume re-sent 100 such steps). So a launched attempt after the
first (``MELISSA_TRAINER_ATTEMPT`` > 0: the launcher counts from 0), a launched
batch job that Slurm requeued (``SLURM_RESTART_COUNT`` > 0: the same script again, its
attempt unchanged; `launched_env.requeued`), or a worker's simulation given again
(`worker_given.given_attempt` > 0: the launcher's answer to the worker carries the attempt),
its endpoints from a rendezvous, asks each receiver at its first send which of its
steps the receiver holds (HELD_QUERY on the follow socket, docs/protocol.md section 17;
`follow.Follower.held`): its ledger now (its checkpoint's record and what it took
since: the steps it would drop as duplicates, `stream.ingest_record.held_now`). A step
its receiver holds is then not sent; it is counted in that receiver's BYE
(`Transport.steps`), as after a follow, so that the receiver finds the simulation
complete.

A sign of life: the launcher hears a simulation by the DATA and BATCH messages its
receivers count (duplicates included: `step_ledger.StepLedger.count_message`), every
rank's (receiver 0's at once, the other ranks' handed to rank 0 up to
`rank_activity.PUBLISH_EVERY` s later: `stream.rank_activity`), and kills one silent
past its bound as hung (`launcher.silence_watch`: the start-up allowance until its
first message). A rerun whose solver takes longer to recompute the held steps than that
bound used to be killed on every attempt, and the resumed study failed. So a held step
is sent anyway (its receiver drops it as a duplicate and counts it, the launcher hears
it; counted once in its BYE as any step sent: `Transport.steps`, a set):

* the client's first send, held or not, goes out at once, to whichever receiver its
  step is routed (`wire.routing.receiver_of`): the rerun's first message comes when
  the first attempt's did, not after its held part and its first unheld step, which a
  start-up allowance that the first attempt met could miss (a user trial: 0.6 s of held
  steps, then a 4.6 s step, killed under a 7 s allowance on every attempt). With a
  communicator every rank sends it: "the first send" is the same on every rank (each
  calls `send` for the same steps), unlike a clock, and a send before the parts are
  placed is collective;
* later, once `interval` seconds have passed since this client last sent a step (held
  or not, to any receiver), the next held step. The interval is a quarter of the
  launcher's shortest silence bound for this attempt (``MELISSA_TRAINER_SILENCE_S``,
  `launched_env.check_silence`), at least `SIGN_FLOOR`; `SIGN_DEFAULT` without one:
  far more than the hand-off's latency. A rerun that recomputes its held steps within
  the interval sends one duplicate: its first step. With a communicator, a rank sends
  this sign of life only once the parts are placed (`pace`: each rank's clock is its
  own, and the ranks could disagree on whether to send a collective send).

Before `stream.rank_activity` the launcher heard receiver 0 alone, so the signs of life
went to receiver 0 only, on its own clock, and a rerun whose held steps never routed
there (a simulation whose every step goes to rank 1 under ``(s + t) % W``, or the held
tail of a longer one) sent none: killed as hung on every attempt when its solver took
longer than the bound to recompute them (tests/launcher/test_rerun_sign_every_rank_e2e.py).

Only an optimisation: the answer is asked once, with a short bound (`ASK_TIMEOUT`); a
receiver without a follow socket (an older trainer), a rendezvous of another run than
the client's, or no answer in time: everything is sent, as before (logged at INFO).
A first attempt asks nothing (nothing of it can be held), unless Slurm requeued its
batch job (``SLURM_RESTART_COUNT`` > 0, above). Not thread-safe: the client's thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from melissa_trainer.client.config import check_attempt
from melissa_trainer.client.follow import Follower, FollowError
from melissa_trainer.client.launched_env import check_silence, requeued
from melissa_trainer.client.worker_given import given_attempt
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire import HELD_FINISHED, HELD_STEPS, HeldReply
from melissa_trainer.wire.routing import receiver_of

if TYPE_CHECKING:
    from melissa_trainer.client.transport import Transport

__all__ = [
    "ASK_TIMEOUT",
    "SIGN_DEFAULT",
    "SIGN_FLOOR",
    "SIGN_SHARE",
    "RerunSkip",
    "attempt",
    "rerun_skip",
    "sign_interval",
]

logger = logging.getLogger("melissa_trainer.client")

#: seconds a rerun waits for each receiver's HELD before it sends every step
ASK_TIMEOUT = 5.0
#: the share of the launcher's silence bound after which a rerun sends a held step anyway
SIGN_SHARE = 0.25
#: the shortest interval between a rerun's signs of life (seconds)
SIGN_FLOOR = 0.2
#: the interval without a bound from the launcher (``MELISSA_TRAINER_SILENCE_S`` unset)
SIGN_DEFAULT = 10.0


def sign_interval() -> float:
    """Seconds of silence after which a rerun sends the held step at hand (module
    docstring): `SIGN_SHARE` of ``$MELISSA_TRAINER_SILENCE_S``, at least `SIGN_FLOOR`;
    `SIGN_DEFAULT` when unset. (`Client` checked the variable at its start.)"""
    silence = check_silence()
    return SIGN_DEFAULT if silence is None else max(SIGN_FLOOR, SIGN_SHARE * silence)


def attempt(simulation_id: int | None = None) -> int:
    """This launched simulation's attempt (``$MELISSA_TRAINER_ATTEMPT``, 0 the first:
    `config.check_attempt`, which `Client` ran at its start), else, in a worker, the
    attempt the launcher gave `simulation_id` (`worker_given.given_attempt`); -1 when neither."""
    launched_attempt = check_attempt()
    if launched_attempt >= 0:
        return launched_attempt
    given = None if simulation_id is None else given_attempt(simulation_id)
    return -1 if given is None else given


class RerunSkip:
    """Which steps a rerun skips: those `replies` (each receiver's HELD, rank order) say
    held, unless due as a sign of life (module docstring); each skipped step is added
    to its receiver's `steps` (its BYE's count). Called for every step the client sends
    while it skips (`Sending._gated`): it sees each send."""

    def __init__(
        self,
        replies: Sequence[HeldReply],
        simulation_id: int,
        routing: str | None,
        transport: Transport,
        interval: float,
    ) -> None:
        self.replies, self.simulation_id, self.routing = list(replies), simulation_id, routing
        self.transport, self.interval = transport, interval
        self.steps: list[StepSet] = transport.steps
        #: steps not sent, held already
        self.skipped = 0
        #: held steps sent anyway, signs of life (their receivers drop them)
        self.signs = 0
        #: whether no step has been sent yet (the next one, held or not, is sent)
        self.first = True
        #: `time.monotonic()` of the last send (the clock of the signs)
        self.heard: float = transport.opened

    def __call__(self, step: int, pace: bool = True) -> bool:
        """Whether `step` is held by its receiver and is not due as a sign of life: the
        client's first send always is one, a later one once `interval` s have passed
        since the last send, if `pace` (whether one may be sent now). A held step not
        due is counted, not sent."""
        rank = receiver_of(self.simulation_id, step, len(self.replies), self.routing)
        held = self.replies[rank].holds(step, self.routing)
        now = time.monotonic()
        if not held or self.first or (pace and now - self.heard >= self.interval):
            self.signs += held  # (sent: `send_step` or the fast path adds it to `steps`)
            self.first, self.heard = False, now
            return False
        self.steps[rank].add(step)
        self.skipped += 1
        return True


def rerun_skip(
    rendezvous: str | None,
    simulation_id: int,
    routing: str | None,
    endpoints: Sequence[str],
    transport: Transport,
) -> RerunSkip | None:
    """The skip of a launched rerun whose endpoints came from `rendezvous` (module
    docstring), asking each receiver once, its signs of life paced by `sign_interval`;
    None when there is nothing to skip (a first attempt, not launched, no rendezvous,
    receivers that hold nothing of it or cannot be asked: then every step is sent)."""
    if rendezvous is None or (attempt(simulation_id) < 1 and not requeued()):
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
    return RerunSkip(replies, simulation_id, routing, transport, sign_interval())
