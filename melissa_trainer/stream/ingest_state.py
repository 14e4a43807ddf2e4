"""What a receiver's ingest knows, and its checkpoint record: `IngestState`.

`IngestState` owns every piece of the ingest's state: the ledgers of the simulations
that said HELLO (`assembly.StepLedger`), the samples in progress, the keys of the
last samples put, the finished simulations (`archive`), those given up, the study's
schema and the counters. It finishes simulations (`check_finished`: every step a BYE
announced is in), tells when the stream ends (`check_expected`), answers the launcher
and the watchdog (`activity`, `unfinished`, `describe`), and takes and restores its
record itself (`state_dict`, `load_state_dict`). What it does with each message is
`ingest.Ingest`'s, its subclass; the receivers use `Ingest`. One thread (the ingester)
changes it; the readers from other threads are named in their docstrings.

The record is per rank: each receiver records the time steps sent to it (t with
t % world_size == rank), so resuming on another number of ranks merges the k old
records and re-splits them by step for the new routing: `melissa_trainer.stream.reshard`.
Its version is `STATE_VERSION`; the upgrade of earlier versions is
`common.migrations`' ("receiver").
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from melissa_trainer import wire as protocol
from melissa_trainer.buffers import Sample
from melissa_trainer.common.migrations import CURRENT
from melissa_trainer.stream.archive import Archive
from melissa_trainer.stream.assembly import REJECT_REASONS, Assembly, StepLedger
from melissa_trainer.stream.log_summary import LogSummary
from melissa_trainer.stream.nonfinite import NonFiniteGuard
from melissa_trainer.stream.recent_keys import RecentKeys
from melissa_trainer.stream.schema import StudySchema
from melissa_trainer.wire import FieldSpec

__all__ = ["COUNTERS", "STATE_VERSION", "TAIL_COUNTERS", "IngestState", "telemetry_keys"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: 3: finished simulations may be archived (``"archive"``); 2: a simulation's BYE counts
#: are the steps sent to this receiver (protocol 2); in 1 they were over all receivers
STATE_VERSION = CURRENT["receiver"]
#: the ingest's counters, in telemetry order: these, the rejections, then the tail
COUNTERS = ("messages", "bytes", "samples_put", "duplicates")
TAIL_COUNTERS = (
    "simulations_finished",
    "simulations_abandoned",
    "incomplete_dropped",
    "ignored_after_end",
    "nonfinite_refused",
    "connections_lost",
)


def telemetry_keys() -> list[str]:
    """The fixed telemetry keys of every receiver (the same on every rank)."""
    reasons = [f"rejected_{r}" for r in REJECT_REASONS]
    return [*COUNTERS, "rejected", *reasons, *TAIL_COUNTERS]


class IngestState:
    """What an ingest knows (see the module docstring); its subclass `ingest.Ingest`
    handles the messages.

    Args:
        rank, world_size: this receiver gets the time steps t with t % world_size == rank.
        put: puts one sample, blocking; returns False if the stream is over (buffer closed).
        put_many: puts samples in order, blocking; returns how many were put (fewer if
            the stream ended). Default: `put` one by one.
        end: called once `expected` simulations have finished (abandoned ones count,
            redrawn ones do not: their replacement is expected instead).
        schema: the fields every simulation must declare; with `one_schema` and no
            `schema`, the first accepted HELLO's. A HELLO declaring others is refused
            (``schema_mismatch``) and listed in `refused`.
        parameters: the parameter names every simulation must send (refused otherwise,
            as a schema); None: no rule.
        one_schema: hold every simulation to one schema (False and no `schema`: each
            simulation declares its own fields).
        recent_size: how many of the last keys put the checkpoint keeps (at least the
            buffer's capacity: see `load_state`).
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
        self.pending: dict[tuple[int, int], Assembly] = {}
        self._pending_bytes = 0
        self.recent = RecentKeys(recent_size)  # the keys of the last samples recorded
        self.marked = 0  # samples recorded as done (the buffer's put count + one in flight)
        #: samples recorded (marked) whose put has not returned yet: counted in
        #: `samples_put` only once it does, but a snapshot taken while it blocks (on a
        #: full buffer) must count them, as it records them (see `state_dict`)
        self.in_flight = 0
        self.finished_ids: list[int] = []
        self.abandoned: set[int] = set()  # given up by the launcher, not finished
        self.replaced: set[int] = set()  # given up and redrawn: not counted as ended
        self.schema = StudySchema(schema, enforce=one_schema, parameters=parameters)
        #: (simulation id, why) of every refused HELLO, and of every simulation failed
        #: for non-finite data (``nonfinite="fail"``), in order (append-only: read by
        #: the launcher's thread)
        self.refused: list[tuple[int, str]] = []
        #: logs rejections and drops; the receiver ticks it when idle, flushes it at the end
        self.log = LogSummary(logger, f"receiver of rank {rank}", log_interval)
        self.messages = self.bytes = self.samples_put = self.duplicates = 0
        self.simulations_finished = self.incomplete_dropped = self.ignored_after_end = 0
        #: connections closed between a HELLO and its BYE (`connections.ConnectionWatch`:
        #: incremented by its thread, the only writer)
        self.connections_lost = 0
        self.rejected = dict.fromkeys(REJECT_REASONS, 0)
        #: the check of samples for NaN and Inf (its counter: `nonfinite_refused`)
        self.nonfinite = NonFiniteGuard(nonfinite, self.log, self.refused)
        self._check_finite = self.nonfinite.checks

    def _put_each(self, samples: Sequence[Sample]) -> int:
        n = 0
        for sample in samples:
            if not self._put(sample):
                break
            n += 1
        return n

    @property
    def simulations_abandoned(self) -> int:
        return len(self.abandoned)

    @property
    def nonfinite_refused(self) -> int:
        """Samples dropped for holding NaN or Inf (see `NonFiniteGuard`)."""
        return self.nonfinite.refused

    def activity(self) -> dict[int, int]:
        """Simulation id -> DATA messages received so far (the launcher's heartbeat).

        Safe to call from another thread: the dict is copied in one C-level step."""
        return {sid: rec.messages for sid, rec in list(self.sims.items())}

    def first_message_at(self, simulation_id: int) -> float | None:
        """`time.monotonic()` when the simulation's first DATA message arrived here in
        this process (None: none yet, or a ledger loaded from a checkpoint). Any thread:
        one attribute read."""
        sim = self.sims.get(simulation_id)
        return None if sim is None else sim.first_data_at

    def client_of(self, simulation_id: int) -> str | None:
        """The client library the simulation's HELLO named here (`Hello.client`: "python",
        "c"), None when unknown (no HELLO yet, it did not say, a ledger loaded from a
        checkpoint). Any thread: one attribute read."""
        sim = self.sims.get(simulation_id)
        return None if sim is None else sim.client

    def samples_of(self) -> dict[int, tuple[int, int]]:
        """Simulation id -> (its steps received here, of which refused for NaN or Inf
        in this run), for each simulation that said HELLO here: what each contributed
        (the study's end-of-run account). A best-effort read from any thread."""
        refused = dict(self.nonfinite.by_simulation)
        steps = dict(self.archive.steps)
        steps.update({sid: rec.completed for sid, rec in list(self.sims.items())})
        return {sid: (n, refused.get(sid, 0)) for sid, n in steps.items()}

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
        self.drop_pending([k for k, a in self.pending.items() if a.record is sim])
        logger.info("simulation %d finished (%d time steps)", sim.simulation_id, n)
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

    def check_expected(self) -> None:
        ended = self.simulations_finished + len(self.abandoned)
        if self.expected is not None and ended >= self.expected:
            self._end(
                f"{self.simulations_finished} simulations finished, {len(self.abandoned)} abandoned"
            )

    def all_finished(self) -> bool:
        given_up = self.abandoned | self.replaced
        return all(rec.finished or sid in given_up for sid, rec in self.sims.items())

    def unfinished(self) -> list[int]:
        """Ids of the simulations that said HELLO here and are neither finished nor
        given up, in id order."""
        given_up = self.abandoned | self.replaced
        # (a copy first: this may run in another thread while the ingester adds ledgers
        # and archives finished ones)
        ledgers = list(self.sims.items())
        return sorted(s for s, r in ledgers if not r.finished and s not in given_up)

    def describe(self, sid: int) -> str:
        """What this receiver has of a simulation, for error messages."""
        rec = self.sims.get(sid)
        where = f"rank {self.rank}'s receiver"
        archived = self.archive.steps.get(sid)  # (one read: another thread may ask)
        if archived is not None:
            return f"{where} has all its {archived} steps"
        if rec is None:
            refused = [why for s, why in self.refused if s == sid]
            if refused:
                return f"{where} refused its HELLO: {refused[-1]}"
            return f"{where} has no HELLO from it"
        if rec.finished:
            return f"{where} has all its {rec.completed} steps"
        announced = rec.steps_announced()
        of = "?" if announced is None else str(announced)
        byes = f"BYE from {len(rec.byes)} of {rec.client_count} client ranks"
        return f"{where} has {rec.completed} of {of} steps, {byes}"

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
        """The dedup record (JSON-serializable; bit arrays and recent keys as base64).

        It holds, per simulation with a ledger, its declaration and the bit array of the
        steps received (`StepLedger.to_state`), the finished simulations archived
        (`Archive.to_state`: two arrays), the simulations given up, the study's schema,
        the counters, and the keys of the last samples put (``recent``): the trainer
        snapshots the buffer before this record, so the samples recorded after the
        buffer's snapshot are forgotten at `load_state_dict` and accepted again when
        re-sent. Per rank: each receiver's own (see the module docstring). Called by the
        ingester alone (see `IngestLoop.snapshot`).
        """
        self.archive_due()
        recent = np.array(list(self.recent), dtype="<u8").reshape(-1)
        counters = {k: int(v) for k, v in self.telemetry().items()}
        # A snapshot taken while a put blocks records its samples (marked, in `recent`):
        # count them as put too, so that `load_state_dict` subtracts, from a counter that
        # has them, those the buffer's snapshot lacks (without this a resume was one
        # sample short, a whole batch with BATCH messages). Those the put had already
        # placed before the snapshot are in the buffer's count and stay counted.
        counters["samples_put"] += self.in_flight
        return {
            "version": STATE_VERSION,
            "rank": self.rank,
            "world_size": self.world,
            "simulations": {str(s): rec.to_state() for s, rec in self.sims.items()},
            "archive": self.archive.to_state(),
            "abandoned": sorted(self.abandoned),
            "replaced": sorted(self.replaced),
            "schema": self.schema.to_json(),
            "marked": self.marked,
            "recent": base64.b64encode(recent.tobytes()).decode("ascii"),
            "counters": counters,
        }

    def load_state_dict(self, state: dict[str, Any], buffer_put: int) -> None:
        """Restore a `state_dict()` record of the current version (the receiver upgrades
        older ones) into this ingest, which has seen nothing yet.

        `buffer_put` is the restored buffer's put count. The trainer snapshots the
        buffer before this record, so the samples recorded after the buffer's snapshot
        (the last ``marked - buffer_put`` keys) are not in it: they are forgotten here
        and accepted again when re-sent.
        """
        self.sims = {
            int(s): StepLedger.from_state(int(s), rec) for s, rec in state["simulations"].items()
        }
        self.archive.load_state(state.get("archive"))
        both = self.sims.keys() & self.archive.steps.keys()
        if both:  # one or the other, never both: which steps it has would be ambiguous
            raise ValueError(
                f"invalid receiver state: simulation {min(both)} has both a ledger and an "
                "archive entry"
            )
        raw = np.frombuffer(base64.b64decode(state["recent"], validate=True), "<u8")
        self.recent.extend((int(s), int(t)) for s, t in raw.reshape(-1, 2))
        counters = {k: int(v) for k, v in state["counters"].items()}
        self.messages, self.bytes = counters.get("messages", 0), counters.get("bytes", 0)
        self.samples_put, self.duplicates = (
            counters.get("samples_put", 0),
            counters.get("duplicates", 0),
        )
        self.incomplete_dropped = counters.get("incomplete_dropped", 0)
        self.ignored_after_end = counters.get("ignored_after_end", 0)
        self.connections_lost = counters.get("connections_lost", 0)  # (absent before)
        self.nonfinite.refused = counters.get("nonfinite_refused", 0)  # (absent before)
        self.rejected.update({r: counters.get(f"rejected_{r}", 0) for r in REJECT_REASONS})
        self.abandoned = {int(s) for s in state.get("abandoned", [])}
        self.replaced = {int(s) for s in state.get("replaced", [])}
        self.schema.load_json(state.get("schema"))
        self._forget_after(int(state["marked"]), buffer_put)

    def held_record(self) -> dict[int, tuple[int, int, bytes]]:
        """What this ingest holds of each simulation, as a follow socket answers it
        (`follow_server`): simulation id -> (HELD status, bit count, bit array of the
        local steps completed). Taken once, after `load_state_dict` and before the
        stream starts (the ingester's thread has not started: no lock needed)."""
        out: dict[int, tuple[int, int, bytes]] = {}
        for sid in self.archive.steps:
            out[sid] = (protocol.HELD_FINISHED, 0, b"")
        for sid, rec in self.sims.items():
            if rec.finished:
                out[sid] = (protocol.HELD_FINISHED, 0, b"")
            else:
                nbits = rec.frontier
                out[sid] = (protocol.HELD_STEPS, nbits, bytes(rec.done[: (nbits + 7) // 8]))
        for sid in self.abandoned:
            out[sid] = (protocol.HELD_ABANDONED, 0, b"")
        return out

    def _forget_after(self, marked: int, buffer_put: int) -> None:
        """After `load_state_dict`: forget the last ``marked - buffer_put`` samples
        recorded (not in the buffer's snapshot), then find the finished simulations."""
        behind = marked - buffer_put
        if behind > len(self.recent) or behind < 0:
            logger.warning(
                "receiver record (%d samples) and buffer (%d put) disagree beyond the "
                "recent list: some samples may be lost or seen twice",
                marked,
                buffer_put,
            )
        forgotten = 0
        for _ in range(max(0, min(behind, len(self.recent)))):
            sim, t = self.recent.pop()
            if sim in self.sims:
                rec = self.sims[sim]
                # A step forgotten here was not in the buffer's snapshot: its simulation
                # is not finished after all (it must re-send that step), and its put is
                # not counted (it is counted again when the step is put again).
                if rec.unmark(t // self.world):
                    forgotten += 1
                    rec.finished = False
        self.samples_put = max(0, self.samples_put - forgotten)
        self.finished_ids = list(self.archive.steps)
        for sid, rec in self.sims.items():
            if rec.finished:  # archived after `recent_size` more puts, as if finished now
                self.finished_ids.append(sid)
                self.archive.finished(sid, buffer_put)
        self.simulations_finished = len(self.finished_ids)
        self.marked = buffer_put
        for rec in list(self.sims.values()):  # complete already (an upgraded state)
            if not rec.finished and len(rec.byes) >= rec.client_count:
                self.check_finished(rec)
