"""What a receiver's ingest knows, and its checkpoint record: `IngestState`.

`IngestState` owns every piece of the ingest's state: the ledgers of the simulations
that said HELLO (`step_ledger.StepLedger`), the samples in progress, the keys of the
last samples put, the finished simulations (`archive`), those given up, the study's
schema and the counters. It finishes simulations (`check_finished`: every step a BYE
announced is in), tells when the stream ends (`check_expected`), answers the launcher
and the watchdog (`activity`, `unfinished`, `describe`: its read-only queries, in its
base `ingest_queries.IngestQueries`), and takes and restores its record itself
(`state_dict`, `load_state_dict`). What it does with each message is
`ingest.Ingest`'s, its subclass; the receivers use `Ingest`. One thread (the ingester)
changes it; the readers from other threads are named in their docstrings.

The record itself (what it holds, how a resume forgets the samples the buffer's
snapshot lacks, its version `STATE_VERSION`) is `ingest_record`'s; the counters' names
and the telemetry keys (`COUNTERS`, `TAIL_COUNTERS`, `telemetry_keys`), `ingest_counters`'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from melissa_trainer.buffers import Sample
from melissa_trainer.common.words import plural
from melissa_trainer.stream.archive import Archive
from melissa_trainer.stream.assembly import REJECT_REASONS, Assembly

# (the counters' names, imported from here before they were a module of their own)
from melissa_trainer.stream.ingest_counters import COUNTERS as COUNTERS
from melissa_trainer.stream.ingest_counters import TAIL_COUNTERS as TAIL_COUNTERS
from melissa_trainer.stream.ingest_queries import IngestQueries
from melissa_trainer.stream.ingest_record import held_of, load_record, record_of
from melissa_trainer.stream.ingested import Draining
from melissa_trainer.stream.log_summary import LogSummary
from melissa_trainer.stream.nonfinite import NonFiniteGuard
from melissa_trainer.stream.recent_keys import RecentKeys
from melissa_trainer.stream.run_again import RunAgain
from melissa_trainer.stream.schema import StudySchema
from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.stream.twin_hellos import TwinHellos
from melissa_trainer.wire import FieldSpec

__all__ = ["WRONG_RUNS_KEPT", "IngestState", "wrong_run_reason"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: how many simulations refused as another run's `IngestState.wrong_runs` remembers (any
#: number of ids may come from other runs: the oldest is forgotten first)
WRONG_RUNS_KEPT = 1024


def wrong_run_reason(theirs: str, ours: str | None) -> str:
    """Why a simulation whose HELLO named run `theirs` was refused by a receiver serving
    run `ours` (``wrong_run``), as a client is told it."""
    return (
        f"its HELLO named run {theirs}, and this receiver serves run {ours} (wrong_run): "
        f"the rendezvous it read was another trainer's, or went stale while it started; "
        f"everything it sent here was dropped"
    )


class IngestState(IngestQueries):
    """What an ingest knows (see the module docstring); its subclass `ingest.Ingest`
    handles the messages.

    Args:
        rank, world_size: this receiver gets the time steps t of simulation s with
            ``wire.routing.receiver_of(s, t, world_size, routing) == rank``, the
            routing its HELLO said (`shifted`).
        put: puts one sample, blocking; returns False if the stream is over (buffer closed).
        put_many: puts samples in order, blocking; returns how many were put (fewer if
            the stream ended). Default: `put` one by one.
        end: called once `expected` simulations have finished (abandoned ones count,
            redrawn ones do not: their replacement is expected instead).
        schema: the fields every simulation must declare; with `one_schema` and no
            `schema`, the first accepted HELLO's. A HELLO declaring others is refused
            (``schema_mismatch``) and listed in `refused`.
        parameters: the parameter names every simulation must send (refused otherwise,
            as a schema), in the order of every sample's ``parameters`` vector; None:
            no rule on the names (the order: `stream.schema`).
        one_schema: hold every simulation to one schema (False and no `schema`: each
            simulation declares its own fields).
        recent_size: how many of the last keys put the checkpoint keeps (at least the
            buffer's capacity: see `load_state_dict`), besides the samples of the
            largest message (`keep_recent`).
        log_interval: seconds between two summaries of rejected messages and dropped
            incomplete samples (`log`; the first of each reason is logged in full).
        run_id: this run's identity: a HELLO carrying another is refused (``wrong_run``,
            not listed in `refused`: the simulation is another run's, which this run's
            launcher must not kill under that id); one carrying none is accepted.
        nonfinite: the policy for samples holding NaN or Inf (`ReceiverConfig.nonfinite`;
            the check is `nonfinite`'s, a `NonFiniteGuard`).
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        *,
        put: Callable[[Sample], bool],
        end: Callable[[str], None],
        put_many: Callable[[Sequence[Sample]], int] | None = None,
        expected: int | None,
        max_field_bytes: int,
        max_pending: int,
        max_pending_bytes: int,
        max_time_step: int,
        recent_size: int,
        schema: Sequence[FieldSpec] | None = None,
        one_schema: bool = False,
        parameters: Sequence[str] | None = None,
        log_interval: float = 30.0,
        run_id: str | None = None,
        nonfinite: str = "refuse",
    ) -> None:
        self.rank, self.world = rank, world_size
        self.run_id = run_id
        self._put, self._end = put, end
        self._put_many = put_many or self._put_each
        self.expected = expected
        self._max_field_bytes, self._max_time_step = max_field_bytes, max_time_step
        self._max_pending, self._max_pending_bytes = max_pending, max_pending_bytes
        #: the ledgers of running simulations, and of finished ones until `archive` takes them
        self.sims: dict[int, StepLedger] = {}
        self.archive = Archive(recent_size)  # finished simulations, a few bytes each
        self.run_again = RunAgain(rank)  # a finished simulation's HELLO again: said
        #: the simulations (ledger or archived) whose HELLO said routing
        #: "simulation_step" (``(s + t) % W``); the others are routed ``t % W``
        self.shifted: set[int] = set()
        self.pending: dict[tuple[int, int], Assembly] = {}
        self._pending_bytes = 0
        self.recent = RecentKeys(recent_size)  # the keys of the last samples recorded
        #: what `recent` holds besides one message's samples, and that message's
        #: samples (`keep_recent`; read per BATCH: one compare, not a call)
        self._recent_base, self.recent_spare = recent_size, 0
        self.marked = 0  # samples recorded as done (the buffer's put count + one in flight)
        #: samples recorded (marked) whose put has not returned yet: counted in
        #: `samples_put` only once it does, but a snapshot taken while it blocks (on a
        #: full buffer) must count them, as it records them (see `state_dict`)
        self.in_flight = 0
        #: the steps of a batch draining into the buffer, for receipts (`ingested`)
        self.draining = Draining()
        self.finished_ids: list[int] = []
        self.abandoned: set[int] = set()  # given up by the launcher, not finished
        self.replaced: set[int] = set()  # given up and redrawn: not counted as ended
        self.schema = StudySchema(schema, enforce=one_schema, parameters=parameters)
        #: (simulation id, why) of every refused HELLO, and of every simulation failed
        #: for non-finite data (``nonfinite="fail"``), in order (append-only: read by
        #: the launcher's thread)
        self.refused: list[tuple[int, str]] = []
        #: simulation id -> why, of the last `WRONG_RUNS_KEPT` simulations whose HELLO
        #: was refused as another run's (``wrong_run``): what an ADMISSION_QUERY, which
        #: names no run, is answered (`follow_answers.admission_of`). Apart from
        #: `refused`: the launcher must not act on another run's ids. Written by the
        #: ingester (`refuse_other_run`), read by the follow thread (one `get`).
        self.wrong_runs: dict[int, str] = {}
        #: simulation id -> steps a rerun is told held (HELD), logged at finish (follow thread)
        self.rerun_held: dict[int, int] = {}
        #: logs rejections and drops; the receiver ticks it when idle, flushes it at the end
        self.log = LogSummary(logger, f"receiver of rank {rank}", log_interval)
        self.messages = self.bytes = self.samples_put = self.duplicates = 0
        self.simulations_finished = self.incomplete_dropped = self.ignored_after_end = 0
        #: connections closed between a HELLO and its BYE (`connections.ConnectionWatch`:
        #: incremented by its thread, the only writer)
        self.connections_lost = 0
        self._unfinished_told = False  # `_warn_unfinished`: said once
        self.rejected = dict.fromkeys(REJECT_REASONS, 0)
        #: the check of samples for NaN and Inf (its counter: `nonfinite_refused`)
        self.nonfinite = NonFiniteGuard(nonfinite, self.log, self.refused)
        self._check_finite = self.nonfinite.checks
        #: HELLOs of a simulation rank already open on another connection (`twin_hellos`)
        self.twins = TwinHellos(rank)

    def keep_recent(self, samples: int) -> None:
        """Before a message of `samples` samples is recorded: let `recent` hold the
        last ``recent_size + samples`` keys from now on (and the archive wait as many
        puts). A resume must forget every key recorded that the buffer's snapshot lacks
        (`load_state_dict`): up to the puts after it (at most the buffer's capacity,
        which ``recent_size`` covers) and the samples of one message (a pump's that did
        not fit, waiting in the `Feeder`'s overflow, or those of a put blocked on the
        full buffer), all recorded before any is put. A BATCH of small fields holds
        thousands: a list of ``recent_size`` kept too few, and the resume lost the
        others (tests/stream/test_resume_overflow.py)."""
        size = self._recent_base + samples
        if size > self.recent.maxlen:
            self.recent.grow(size)
            self.archive.keep, self.recent_spare = size, samples

    def _put_each(self, samples: Sequence[Sample]) -> int:
        n = 0
        for sample in samples:
            if not self._put(sample):
                break
            n += 1
        return n

    def refuse_other_run(self, simulation_id: int, theirs: str) -> None:
        """Remember that the simulation's HELLO named run `theirs` (refused ``wrong_run``),
        with the fix (an older client, asking ADMISSION_QUERY, adds none), forgetting the
        oldest beyond `WRONG_RUNS_KEPT`."""
        why = wrong_run_reason(theirs, self.run_id)
        fix = (
            ". Start it again (it reads the rendezvous afresh), with the same simulation "
            "id; unset MELISSA_TRAINER_RUN_ID if its environment sets one"
        )
        self.wrong_runs.pop(simulation_id, None)  # (a repeated id: the newest again)
        self.wrong_runs[simulation_id] = why + fix
        if len(self.wrong_runs) > WRONG_RUNS_KEPT:
            del self.wrong_runs[next(iter(self.wrong_runs))]

    @property
    def simulations_abandoned(self) -> int:
        return len(self.abandoned)

    @property
    def nonfinite_refused(self) -> int:
        """Samples dropped for holding NaN or Inf (see `NonFiniteGuard`)."""
        return self.nonfinite.refused

    # -- finishing ------------------------------------------------------------------------

    def drop_pending(self, keys: Iterable[tuple[int, int]], lost: bool = False) -> None:
        for key in keys:
            asm = self.pending.pop(key)
            self._pending_bytes -= asm.nbytes
            self.incomplete_dropped += 1
            if lost:  # counts as done for finishing; accepted if re-sent
                asm.record.lost.add(key[1] // self.world)

    def check_finished(self, sim: StepLedger) -> None:
        n = sim.steps_announced()  # the steps sent here, whatever their numbering
        if sim.finished or n is None or sim.completed + len(sim.lost) < n:
            return
        sim.finished = True
        self.abandoned.discard(sim.simulation_id)  # finished after all: counted once
        self.replaced.discard(sim.simulation_id)
        self.simulations_finished += 1
        self.finished_ids.append(sim.simulation_id)
        self.nonfinite.finished(sim.simulation_id)  # (its HELLO counts per client rank)
        self.drop_pending([k for k, a in self.pending.items() if a.record is sim])
        logger.info("simulation %d finished (%d time steps)", sim.simulation_id, n)
        if held := self.rerun_held.pop(sim.simulation_id, 0):  # (summarised: once, not per step)
            logger.info(
                "simulation %d: its rerun skipped %s the receiver of rank %d already held "
                "(from its checkpoint or an earlier run of it) and sent %d new",
                *(sim.simulation_id, plural(held, "time step"), self.rank),
                max(sim.completed - held, 0),
            )
        self.archive.finished(sim.simulation_id, self.marked)
        self.archive_due()
        self.check_expected()

    def archive_due(self) -> None:
        """Hand the finished ledgers whose keys left `recent` to the archive (O(1)
        amortized: each finished simulation is looked at once, see `Archive`)."""
        for sid in self.archive.due(self.marked):
            sim = self.sims.get(sid)
            if sim is not None and self.archive.take(sim):
                del self.sims[sid]
                self.nonfinite.finished(sid)  # (a revived one's HELLO counts: `hello`)

    def check_expected(self) -> None:
        ended = self.simulations_finished + len(self.abandoned)
        if self.expected is not None and ended >= self.expected:
            self._warn_unfinished(self.expected)
            self._end(
                f"{plural(self.simulations_finished, 'simulation')} finished, "
                f"{len(self.abandoned)} abandoned"
            )

    def _warn_unfinished(self, expected: int) -> None:
        """One WARNING when the stream ends on `expected` with simulations part-way
        here: their samples so far were put (and trained on), the rest is ignored and
        their close not confirmed. In external mode the usual cause is more solvers
        started than `expected_simulations`, which nothing else says on this side."""
        unfinished = self.unfinished()
        if not unfinished or self._unfinished_told:
            return
        self._unfinished_told = True
        shown = ", ".join(map(str, unfinished[:8])) + (", ..." if len(unfinished) > 8 else "")
        samples = sum(rec.completed for s in unfinished if (rec := self.sims.get(s)))
        logger.warning(
            "receiver of rank %d: the stream ends with expected_simulations=%d ended "
            "(%d finished, %d abandoned) while %s had begun here and not "
            "finished (%s): %s put into the buffer (and trained on); "
            "what they send from now on is ignored (ignored_after_end) and their close is "
            "not confirmed. If you started more simulations than expected_simulations "
            "(external mode), raise ReceiverConfig.expected_simulations",
            *(self.rank, expected, self.simulations_finished, len(self.abandoned)),
            plural(len(unfinished), "other simulation"),
            shown,
            plural(samples, "of their samples was", "of their samples were"),
        )

    def all_finished(self) -> bool:
        given_up = self.abandoned | self.replaced
        return all(rec.finished or sid in given_up for sid, rec in self.sims.items())

    # -- telemetry, checkpoint ---------------------------------------------------------

    def received(self, size: int, ended: bool) -> bool:
        """Count one message of `size` bytes; False when the stream has `ended` (the
        message is then counted as ignored, and is not to be decoded)."""
        self.messages += 1
        self.bytes += size
        if ended:
            self.ignored_after_end += 1
            return False
        return True

    def telemetry(self) -> dict[str, float]:
        rejected = dict(self.rejected)
        out = {k: float(getattr(self, k)) for k in COUNTERS}
        out["rejected"] = float(sum(rejected.values()))
        out.update({f"rejected_{r}": float(n) for r, n in rejected.items()})
        out.update({k: float(getattr(self, k)) for k in TAIL_COUNTERS})
        return out

    def state_dict(self) -> dict[str, Any]:
        """The dedup record (JSON-serializable; bit arrays and recent keys as base64):
        `ingest_record.record_of`.

        It holds, per simulation with a ledger, its declaration and the bit array of the
        steps received (`StepLedger.to_state`), the finished simulations archived
        (`Archive.to_state`: two arrays), the simulations given up, the study's schema
        and its parameter order when learned (`StudySchema.order`), the counters, and
        the keys of the last samples put (``recent``): the trainer snapshots the buffer
        before this record, so the samples recorded after the buffer's snapshot are
        forgotten at `load_state_dict` and accepted again when
        re-sent. Per rank: each receiver's own (see `ingest_record`). Called by the
        ingester alone (see `IngestLoop.snapshot`).
        """
        return record_of(self)

    def load_state_dict(self, state: dict[str, Any], buffer_put: int) -> None:
        """Restore a `state_dict()` record of the current version (the receiver upgrades
        older ones) into this ingest, which has seen nothing yet: `ingest_record.load_record`.

        `buffer_put` is the restored buffer's put count. The trainer snapshots the
        buffer before this record, so the samples recorded after the buffer's snapshot
        (the last ``marked - buffer_put`` keys) are not in it: they are forgotten here
        and accepted again when re-sent.
        """
        load_record(self, state, buffer_put)
        self.run_again.resumed = True  # (a finished simulation's rerun is then expected)

    def held_record(self) -> dict[int, tuple[int, int, bytes]]:
        """What this ingest holds of each simulation, as a follow socket answers it
        (`follow_server`): simulation id -> (HELD status, bit count, bit array of the
        local steps completed) (`ingest_record.held_of`). Taken once, after
        `load_state_dict` and before the stream starts (the ingester's thread has not
        started: no lock needed)."""
        return held_of(self)
