"""Samples holding NaN or Inf, caught at ingest: the receiver's `nonfinite` policy.

One simulation that diverges and sends NaN would otherwise poison the run: its samples
reach the loss, the loss is NaN from then on, and so is every weight. The receiver
checks every complete sample's floating-point fields (integer and boolean fields cannot
hold NaN: never checked) and applies `ReceiverConfig.nonfinite`:

* ``"refuse"`` (the default): the sample is dropped, counted (telemetry
  ``nonfinite_refused``) and logged (the first in full with its simulation, step and
  field, the others in the receiver's periodic summary). For exactly-once accounting
  it counts as *received*: its step is marked done in the simulation's ledger (a
  restarted simulation re-sending it is a duplicate, dropped; the simulation finishes
  without it) but it is never put, so the buffer's put count and the receiver's
  checkpoint record (``marked``, ``recent``) stay in step (see `ingest_state`).
* ``"accept"``: no check (for data that legitimately holds NaN, such as masks handled
  by the user's loss); the trainer's loss check still stops a run whose loss is not
  finite (`melissa_trainer.core.loss_guard`).
* ``"fail"``: the sample is dropped and counted, its step is *not* marked (a restarted
  simulation sends it again, and it is checked again), and the simulation fails: it is
  listed in `Ingest.refused` (once per attempt: until a HELLO of its next attempt,
  `NonFiniteGuard.attempt`), which rank 0's
  receiver reports to a study's launcher, which kills it and counts a failed attempt
  (then restarts it, or applies its ``on_failure``), as it does for a HELLO refused for
  its fields. The receiver of another rank of a study hands the failure to rank 0's
  (`nonfinite_handoff`, through the rendezvous directory, naming the attempt), which
  lists it as its own once it has read that attempt's HELLO: the launcher kills each
  attempt once, whichever ranks received its NaN. Where no
  launcher reads that list (external mode: no one to hand it to), the receiver fails
  instead (`NonFiniteDataError`): training stops with a `SourceError` naming the
  simulation, the step and the field.

Where the check runs: a message carrying FLAG_FINITE (`protocol`) was checked by its
sender, on the simulation's core: the Python client checks every float field it sends
and sets the flag when it passed (the C client likewise), so the receiver skips the
check of a field whose every part carries it (a sample assembled from several ranks'
parts is checked if one part came without it), and of a BATCH carrying it. The flag is
the sender's word: a sender that sets it on NaN breaks the protocol, and such a sample
is put (the loss check, `melissa_trainer.core.loss_guard`, is the backstop). A message
without it (an older client, a non-finite field, a sender that does not check) is
checked here as before: one check (`all_finite`, in `finite`: a BLAS dot product of
the field with itself, then ``np.isfinite(arr).all()`` only if that is not finite) per
float field of a sample, or per batch of steps of one field (a batch that fails it
goes record by record): one pass over the bytes, without a temporary array, on the
trainer's core (its cost: docs/measured.md, issue 28; docs/concepts/stream.md).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import TYPE_CHECKING

import numpy as np

from melissa_trainer.stream.finite import FLOAT_KINDS, all_finite
from melissa_trainer.stream.log_summary import NONFINITE, LogSummary

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.stream.step_ledger import StepLedger

__all__ = ["NONFINITE_POLICIES", "NonFiniteDataError", "NonFiniteGuard", "check_policy"]

#: the values of `ReceiverConfig.nonfinite`, the default first
NONFINITE_POLICIES = ("refuse", "accept", "fail")


class NonFiniteDataError(RuntimeError):
    """A simulation sent NaN or Inf under ``nonfinite="fail"`` and no launcher can fail
    it: the receiver fails (training stops with this message). `simulation_id` and
    `time_step` name the sample (the receiver's stop record carries them: a closing
    client of that simulation is told why the trainer stopped, `stop_record`)."""

    def __init__(
        self, message: str, simulation_id: int | None = None, time_step: int | None = None
    ) -> None:
        super().__init__(message)
        self.simulation_id, self.time_step = simulation_id, time_step


def check_policy(value: object) -> str:
    """`value` if it is one of `NONFINITE_POLICIES`, else a ValueError naming the field."""
    if value not in NONFINITE_POLICIES:
        raise ValueError(
            f"nonfinite must be one of {', '.join(map(repr, NONFINITE_POLICIES))}, not "
            f"{value!r}: 'refuse' drops samples holding NaN or Inf, 'accept' trains on them, "
            "'fail' fails the simulation that sent them"
        )
    return str(value)


class NonFiniteGuard:
    """One receiver's non-finite check: its policy, counter and failures.

    Args:
        policy: one of `NONFINITE_POLICIES` (see the module docstring).
        log: the receiver's log summary (events of kind ``NONFINITE``).
        refused: the receiver's list of refused simulations (`Ingest.refused`, which a
            launcher reads): a simulation failed under "fail" is appended to it.

    Used by the ingester's thread only; the lists are append-only (read by others).
    """

    def __init__(self, policy: str, log: LogSummary, refused: list[tuple[int, str]]) -> None:
        self.policy = check_policy(policy)
        #: whether samples are checked at all (not under "accept")
        self.checks = self.policy != "accept"
        self._log, self._refused = log, refused
        #: a launcher reads `refused` (`IngestLoop.report_refusals_to_launcher`);
        #: otherwise "fail" raises `NonFiniteDataError`
        self.launcher = False
        #: called with each simulation failed under "fail", before the launcher can read
        #: it (so before its kill): rank 0's word to the other ranks (`nonfinite_kills`)
        self.announce: Callable[[int], None] | None = None
        #: on a rank other than 0: hands a simulation failed under "fail" (its id, time
        #: step, why, `heard_kills` at its HELLO, its `attempt` here) to rank 0's
        #: receiver, True if handed (`nonfinite_handoff`); else, or where None, "fail"
        #: raises `NonFiniteDataError` here (no launcher hears)
        self.hand: Callable[[int, int, str, int, int], bool] | None = None
        #: on a rank other than 0: rank 0's count of failures of a simulation for NaN or
        #: Inf (`NonfiniteKills.failures`), read at each HELLO and handed with a failure
        #: (rank 0 then tells whether it failed that attempt already)
        self.heard_kills: Callable[[int], int] | None = None
        self._kills_at_hello: dict[int, int] = {}
        self._count: dict[int, int] = {}  # attempts failed per simulation (rank 0's word)
        #: samples dropped for non-finite values (the telemetry's ``nonfinite_refused``)
        self.refused = 0
        #: those dropped under "refuse" (their steps marked), per simulation id (this
        #: run's, not saved: for the study's end-of-run account)
        self.by_simulation: dict[int, int] = {}
        #: the first time step refused under "refuse", per simulation id (this run's: the
        #: account's "from time step T"; this rank's share of its steps only)
        self.first_step: dict[int, int] = {}
        #: (simulation id, time step, why) of each simulation failed under "fail", in
        #: order (append-only: read from other threads)
        self.failures: list[tuple[int, int, str]] = []
        self._failed: set[int] = set()  # failed in their current attempt (reported once)
        #: the attempt of each simulation (`attempt`): its running most of `_hellos`
        self._attempts: dict[int, int] = {}
        #: HELLOs read per client rank, of the simulations not finished here only
        #: (`finished` drops them: ~2 KB for 64 client ranks, 1e5 simulations a run),
        #: with the count of a client rank not in it (0; the attempt once finished)
        self._hellos: dict[int, tuple[int, dict[int, int]]] = {}

    def suspect(self, dtype: np.dtype, rows: np.ndarray) -> bool:
        """Whether a batch of steps of one field (`rows`) holds a non-finite value, and
        must go record by record (one check for the batch; False for non-float fields).
        The caller skips it for a batch that carries FLAG_FINITE."""
        return self.checks and dtype.kind in FLOAT_KINDS and not all_finite(rows)

    def bad_field(self, arrays: Mapping[str, np.ndarray], unflagged: Container[str]) -> str | None:
        """The first field of a complete sample holding NaN or Inf, else None; only the
        fields in `unflagged` are checked (those of which a part came without
        FLAG_FINITE: a field whose every part carried it was checked by its sender)."""
        for name, arr in arrays.items():
            if name in unflagged and arr.dtype.kind in FLOAT_KINDS and not all_finite(arr):
                return name
        return None

    def refuse(self, sim: StepLedger, t: int, local: int, name: str) -> bool:
        """Drop the sample of step `t` (local step `local`) of `sim`, whose field `name`
        is not finite, as the policy says; True if its step was marked done ("refuse":
        the caller then sees whether the simulation has finished)."""
        sid = sim.simulation_id
        self.refused += 1
        what = f"simulation {sid} time step {t}: field {name!r} holds NaN or Inf"
        if self.policy == "refuse":
            self.by_simulation[sid] = self.by_simulation.get(sid, 0) + 1  # (marked: counted)
            self.first_step[sid] = min(t, self.first_step.get(sid, t))  # (steps may reorder)
            sim.mark(local)  # received: a re-send is a duplicate (module docstring)
            self._log.event(
                NONFINITE, name, sid, f"refused a sample of {what} (nonfinite='refuse')"
            )
            return True
        why = f"{what} (nonfinite='fail')"
        failed = sid in self._failed  # (this attempt already failed: reported once)
        seen, attempt = self._kills_at_hello.get(sid, 0), self.attempt(sid)
        if not (
            self.launcher
            or failed
            or (self.hand is not None and self.hand(sid, t, why, seen, attempt))
        ):
            raise NonFiniteDataError(
                f"{why}; no launcher restarts simulations here (external mode: no "
                "study's launcher on rank 0 to hand it to): fix the simulation, or set "
                "nonfinite='refuse' to drop such samples and go on",
                sid,
                t,
            )
        self._log.event(NONFINITE, name, sid, f"refused a sample of {why}")
        if not failed:
            self._fail(sim, sid, t, why)
        return False

    def attempt(self, simulation_id: int) -> int:
        """The attempt of `simulation_id` this receiver is on, as it counts them: the
        most HELLOs it read of one client rank of it (1 at its first HELLO; 0 before).
        Every attempt says HELLO to every receiver, each of its client ranks once, so
        the ranks count alike: a hand-off names its attempt by this count (rank k's),
        which rank 0 compares with its own (`helloed`). A client rank's HELLO read
        after another's of the same attempt does not count again (the most, not the
        sum). Counts differ only where an attempt's HELLOs reached some ranks and not
        others (a process killed while it connected): see `nonfinite_handoff`."""
        return self._attempts.get(simulation_id, 0)

    def failed_now(self, simulation_id: int) -> bool:
        """Whether this receiver failed the attempt of `simulation_id` it is on (no HELLO
        of a later one since): on a rank other than 0, refused and handed to rank 0."""
        return simulation_id in self._failed

    def helloed(self, simulation_id: int, attempt: int = 1) -> bool:
        """Whether this receiver has read the HELLO of attempt `attempt` (`attempt`) of
        `simulation_id`: rank 0 holds back another rank's hand-off of that attempt until
        then (`IngestLoop`). Read before it, the hand-off was misjudged: of a first
        attempt, its HELLO read after its failure was taken for a restart's (and its
        NaN here failed it a second time); of a restart, while this receiver was still
        on the attempt before, failed here, it was taken for that attempt's echo, and
        dropped (the restart never failed: its data incomplete, its work lost)."""
        return self.attempt(simulation_id) >= attempt

    def failed_elsewhere(
        self, sim: StepLedger | None, sid: int, t: int, why: str, seen: int
    ) -> bool:
        """Rank 0: another rank's receiver failed simulation `sid` (ledger `sim`, None if
        unknown here) at step `t` for `why` and handed it here (`nonfinite_handoff`),
        having read at that attempt's HELLO `seen` failures of it here: failed as if
        here, for the launcher, unless this attempt was failed already (here, or handed
        by another rank: counted once), which is when it is still failed here (no HELLO
        of a later attempt since) or was failed more than `seen` times (a hand-off read
        only after the restart's HELLO). The caller holds a hand-off until this receiver
        has read the HELLO of the attempt handed (`helloed`): still failed here is then
        that attempt, or a later one. True if it was failed now."""
        if sid in self._failed or self._count.get(sid, 0) > seen:
            return False
        self._fail(sim, sid, t, why)
        return True

    def _fail(self, sim: StepLedger | None, sid: int, t: int, why: str) -> None:
        """Fail this attempt of `sid`: listed once for the launcher, said to the other
        ranks (`announce`)."""
        self._failed.add(sid)
        self._count[sid] = self._count.get(sid, 0) + 1
        if sim is not None:  # (before the launcher hears of it: `connections` reads it)
            sim.nonfinite_failures += 1
        self.failures.append((sid, t, why))
        if self.announce is not None:
            self.announce(sid)
        self._refused.append((sid, why))

    def hello(self, simulation_id: int, client_rank: int = 0) -> None:
        """A HELLO of `simulation_id` from its `client_rank`. Of a new attempt (`attempt`
        grew): its next non-finite sample fails it again. (Messages of a killed attempt
        still queued behind the new HELLO may fail the new attempt: a failed attempt too
        many, never one lost.) Another client rank's HELLO of the same attempt leaves a
        failed attempt failed."""
        base, counts = self._hellos.setdefault(
            simulation_id, (self._attempts.get(simulation_id, 0), {})
        )
        counts[client_rank] = n = counts.get(client_rank, base) + 1
        if n > self._attempts.get(simulation_id, 0):  # (a running most: O(1) a HELLO)
            self._attempts[simulation_id] = n
            self._failed.discard(simulation_id)
        if self.heard_kills is not None:  # (a file read: a HELLO is rare)
            self._kills_at_hello[simulation_id] = self.heard_kills(simulation_id)

    def finished(self, simulation_id: int) -> None:
        """`simulation_id` finished here: its per-client-rank HELLO counts are dropped,
        its `attempt` kept (a few bytes: a hand-off of it, `helloed`, and the study's
        end, `study_end`, still read it). A HELLO of it read later (a finished ledger
        not archived yet, or revived: it runs again) counts its client ranks from that
        attempt on, as if each had said HELLO to each attempt (the usual case: a
        client rank's HELLO that never came here counts as come; its next is of a
        later attempt anyway)."""
        self._hellos.pop(simulation_id, None)
