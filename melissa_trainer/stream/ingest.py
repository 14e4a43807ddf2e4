"""The receiver's core, without sockets or threads: validate, dedup, reassemble, put.

:class:`Ingest` takes decoded messages (HELLO, DATA, BYE) and turns them into samples,
each (simulation, time step) once, handed to a `put` callable; it knows which
simulations have finished and tells `end` when the expected number has. It is used by
one thread (the receiver's); every decision is documented in
:mod:`melissa_trainer.stream.receiver`.

About 610 lines, over the project's ~400: one class whose methods are the receiver's
per-message decisions, kept in one place to read, and the one owner of its state, which
it takes and restores itself (`state_dict`, `load_state_dict`; the record's keys and
version are in `ingest_state`, the upgrade of earlier versions in
`checkpoint_migrations`); its bookkeeping per simulation is in `assembly`, its
finished simulations in `archive`.
"""

from __future__ import annotations

import base64
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from melissa_trainer.buffers import Sample
from melissa_trainer.stream.archive import Archive
from melissa_trainer.stream.assembly import (
    COMPLETE,
    DUPLICATE,
    OVERLAP,
    REJECT_REASONS,
    Assembly,
    SimulationLedger,
    block_of,
    check_hello,
    payload_array,
)
from melissa_trainer.stream.ingest_state import COUNTERS, STATE_VERSION, TAIL_COUNTERS
from melissa_trainer.stream.log_summary import INCOMPLETE, REJECTED, LogSummary
from melissa_trainer.stream.nonfinite import FLOAT_KINDS, NonFiniteGuard, all_finite
from melissa_trainer.stream.protocol import Abandon, Batch, Bye, Data, FieldSpec, Hello
from melissa_trainer.stream.schema import StudySchema

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages


def telemetry_keys() -> list[str]:
    """The fixed telemetry keys of every receiver (the same on every rank)."""
    reasons = [f"rejected_{r}" for r in REJECT_REASONS]
    return [*COUNTERS, "rejected", *reasons, *TAIL_COUNTERS]


class Ingest:
    """Messages in, samples out (see the module docstring).

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
        self.sims: dict[int, SimulationLedger] = {}
        self.archive = Archive(recent_size)  # finished simulations, a few bytes each
        self.pending: dict[tuple[int, int], Assembly] = {}
        self._pending_bytes = 0
        self.recent: deque[tuple[int, int]] = deque(maxlen=recent_size)
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
        self.rejected = dict.fromkeys(REJECT_REASONS, 0)
        #: the check of samples for NaN and Inf (its counter: `nonfinite_refused`)
        self.nonfinite = NonFiniteGuard(nonfinite, self.log, self.refused)
        self._check_finite = self.nonfinite.checks

    # -- messages --------------------------------------------------------------------------

    def data(self, msg: Data, inline: bool) -> None:
        """One DATA; `inline`: its payload is a view of the received bytes."""
        sid, t, _, client_count, name, dtype, shape, _, elements, _, finite = msg
        sim = self.sims.get(sid)
        if sim is None:
            if sid in self.archive:  # finished: every step is a duplicate
                self.duplicates += 1
                return None
            return self.reject("no_hello", sid, f"DATA of step {t} before HELLO")
        sim.messages += 1
        if t >= self._max_time_step:
            return self.reject("bad_step", sid, f"time step {t} >= {self._max_time_step}")
        i = t
        if self.world != 1:
            i, r = divmod(t, self.world)
            if r != self.rank:
                return self.reject("wrong_receiver", sid, f"time step {t}")
        if client_count != sim.client_count:
            return self.reject("bad_client_count", sid, f"{client_count} client ranks")
        layout = sim.layout.get(name)
        if layout is None or (layout[0] is not dtype and layout[0] != dtype) or layout[1] != shape:
            return self.reject("bad_field", sid, f"{name!r} {dtype} {shape} is not declared")
        done, byte = sim.done, i >> 3
        if byte < len(done) and done[byte] >> (i & 7) & 1:
            self.duplicates += 1
            return None
        pending = self.pending
        if sim.single and elements == layout[2] and not (pending and (sid, t) in pending):
            # the fast path: no assembly; the check of the one field without a loop (not
            # of a field its sender checked: FLAG_FINITE, see `nonfinite`)
            arr = payload_array(msg, inline)
            if (
                self._check_finite
                and not finite
                and arr.dtype.kind in FLOAT_KINDS
                and not all_finite(arr)
            ):
                if self.nonfinite.refuse(sim, t, i, name) and len(sim.byes) >= sim.client_count:
                    self.check_finished(sim)  # (its last step may be the one refused)
                return None
            arrays = {
                name: arr,
                "simulation_id": sim.id_array.copy(),
                "time_step": np.array(t, np.int64),
                "parameters": sim.param_array.copy(),
            }
        else:
            key = (sid, t)
            asm = pending.get(key)
            if asm is None:
                asm = self._new_assembly(key, sim)
            outcome = asm.add(msg, layout[2], inline)
            if outcome == DUPLICATE:
                self.duplicates += 1
                return None
            if outcome == OVERLAP:
                detail = f"{name!r} step {t} [{msg.offset}, +{elements}) overlaps a part"
                return self.reject("overlap", sid, detail)
            if outcome != COMPLETE:
                return None
            del pending[key]
            self._pending_bytes -= asm.nbytes
            arrays = {f.name: asm.arrays[f.name] for f in sim.fields}
            if self._check_finite:
                bad = self.nonfinite.bad_field(arrays, asm.unflagged)
                if bad is not None:
                    if self.nonfinite.refuse(sim, t, i, bad) and len(sim.byes) >= sim.client_count:
                        self.check_finished(sim)  # (its last step may be the one refused)
                    return None
            arrays["simulation_id"] = sim.id_array.copy()
            arrays["time_step"] = np.array(t, np.int64)
            arrays["parameters"] = sim.param_array.copy()
        # Recorded before the put: a snapshot taken while the put blocks counts it, and
        # the buffer's put count at resume tells whether it made it into the buffer.
        sim.mark(i)
        self.recent.append((sid, t))
        self.marked += 1
        self.in_flight = 1
        if self._put(arrays):
            self.samples_put += 1
        self.in_flight = 0
        if len(sim.byes) >= sim.client_count:
            self.check_finished(sim)
        return None

    def batch(self, msg: Batch) -> None:
        """One BATCH: several time steps of one field part.

        The usual batch (whole fields of a single-field simulation, the next steps of
        this receiver in order, none seen before: what a client sends) is checked in a
        few comparisons and marked done by byte slices; one of whole fields in another
        order goes through a vectorized dedup (`_batch_any`); any other batch goes
        record by record through `data`, with the same checks and outcomes. The new
        steps become one block of samples (see `assembly.block_of`).
        """
        sid = msg.simulation_id
        sim = self.sims.get(sid)
        if sim is None:
            if sid in self.archive:  # finished: every step is a duplicate
                self.duplicates += msg.records
                return None
            return self.reject("no_hello", sid, f"BATCH of {msg.records} steps before HELLO")
        layout = sim.layout.get(msg.name)
        same = (
            sim.single
            and layout is not None
            and msg.client_count == sim.client_count
            and layout[0] == msg.dtype
            and layout[1] == msg.shape
            and msg.elements == layout[2]
        )
        rows = msg.payloads.reshape(msg.records, *msg.shape) if same else None  # a view
        # record by record, each with its own verdict: a batch of another layout, or
        # one holding NaN or Inf (one sum says it does not, or its sender's FLAG_FINITE:
        # see `nonfinite`)
        if rows is None or (
            self._check_finite and not msg.finite and self.nonfinite.suspect(msg.dtype, rows)
        ):
            for i in range(msg.records):
                self.data(msg.record(i), True)
            return None
        name, w = msg.name, self.world
        st = msg.steps.tolist()
        first, k = st[0], len(st)
        if (  # the usual batch: the next steps of this receiver, in order, all new
            first % w == self.rank
            and first // w >= sim.frontier
            and st[-1] < self._max_time_step
            and st == list(range(first, first + k * w, w))
            and not (self.pending and any((sid, t) in self.pending for t in st))
        ):
            sim.messages += 1
            # Recorded before the puts, in put order (see `data`), all at once.
            sim.mark_range(first // w, first // w + k)
            self.recent.extend(zip(repeat(sid), st))
            self.marked += k
            self.in_flight = k
            self.samples_put += self._put_many(block_of(name, rows, sim, st))
            self.in_flight = 0
        else:
            self._batch_any(msg, sim, rows)
        if len(sim.byes) >= sim.client_count:
            self.check_finished(sim)
        return None

    def _batch_any(self, msg: Batch, sim: SimulationLedger, rows: np.ndarray) -> None:
        """A batch of whole fields in any order, possibly with steps seen before: one
        vectorized dedup; any other batch goes record by record through `data`."""
        sid = msg.simulation_id
        steps = msg.steps.astype(np.int64)  # >= 2**63 wraps negative: caught below
        w = self.world
        local = steps if w == 1 else steps // w
        fast = (
            int(steps.min()) >= 0
            and int(steps.max()) < self._max_time_step
            and (w == 1 or not np.any(steps % w != self.rank))
            and not (self.pending and any((sid, t) in self.pending for t in steps.tolist()))
            and np.unique(steps).size == steps.size  # none twice
        )
        if not fast:
            for i in range(msg.records):
                self.data(msg.record(i), True)
            return
        sim.messages += 1
        done = np.frombuffer(sim.done, np.uint8)
        byte = local >> 3
        seen = np.zeros(steps.size, bool)
        known = byte < done.size
        seen[known] = (done[byte[known]] >> (local[known] & 7)) & 1 == 1
        del done  # mark_many may resize the bytearray: no export may be alive
        new = np.flatnonzero(~seen)
        self.duplicates += steps.size - new.size
        # Recorded before the puts, in put order (see `data`), all at once.
        sim.mark_many(local[new])
        new_steps = steps[new].tolist()
        self.recent.extend(zip(repeat(sid), new_steps))
        self.marked += len(new_steps)
        self.in_flight = len(new_steps)
        self.samples_put += self._put_many(block_of(msg.name, rows[new], sim, new_steps))
        self.in_flight = 0

    def _put_each(self, samples: Sequence[Sample]) -> int:
        n = 0
        for sample in samples:
            if not self._put(sample):
                break
            n += 1
        return n

    def hello(self, hello: Hello) -> None:
        reason = check_hello(hello, self._max_field_bytes)
        if reason is not None:
            return self.reject(reason, hello.simulation_id, "reserved or oversized field")
        sid = hello.simulation_id
        if hello.run_id is not None and self.run_id is not None and hello.run_id != self.run_id:
            # Before anything else: another run's simulation must not revive, or start,
            # a ledger under an id that this run's simulations use too.
            return self.reject(
                "wrong_run",
                sid,
                f"HELLO of run {hello.run_id}, this receiver serves run {self.run_id}: a "
                f"simulation of another trainer (a stale rendezvous or endpoint?); its "
                f"messages are dropped",
            )
        if sid in self.archive:  # runs again (resumed): a ledger, finished, as before
            self.sims[sid] = self.archive.revive(hello)
            self.archive.finished(sid, self.marked)
            return None
        sim = self.sims.get(sid)
        why = None if sim is not None else self.schema.admit(hello.fields, list(hello.parameters))
        if why is not None:
            self.refused.append((hello.simulation_id, why))
            return self.reject("schema_mismatch", hello.simulation_id, why)
        self.nonfinite.hello(sid)  # a new attempt: checked afresh
        if sim is None:
            self.sims[hello.simulation_id] = SimulationLedger.from_hello(hello)
            logger.debug("simulation %d: HELLO of rank %d", hello.simulation_id, hello.client_rank)
        elif not sim.same_declaration(hello):
            self.reject("hello_mismatch", hello.simulation_id, "HELLO differs from the first")
        else:
            sim.order_parameters_as(hello.parameters)
        return None

    def bye(self, bye: Bye) -> None:
        sim = self.sims.get(bye.simulation_id)
        if sim is None:
            if bye.simulation_id in self.archive:  # finished already
                return None
            return self.reject("no_hello", bye.simulation_id, "BYE before HELLO")
        if bye.client_count != sim.client_count:
            return self.reject("bad_client_count", sim.simulation_id, f"{bye.client_count}")
        sim.byes[bye.client_rank] = bye.steps_sent
        self.check_finished(sim)
        return None

    def abandon(self, msg: Abandon) -> None:
        """The launcher gave up on a simulation: stop waiting for it, and count it as
        ended unless a redraw replaces it (`msg.replaced`)."""
        sid = msg.simulation_id
        sim = self.sims.get(sid)
        finished = sid in self.archive or (sim is not None and sim.finished)
        if sid in self.abandoned or sid in self.replaced or finished:
            return
        (self.replaced if msg.replaced else self.abandoned).add(sid)
        self.drop_pending([k for k in self.pending if k[0] == sid])
        if msg.replaced:
            logger.info("simulation %d given up by the launcher, redrawn under a new id", sid)
        else:
            logger.info("simulation %d abandoned by the launcher", sid)
        self.check_expected()

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

    def reject(self, reason: str, sim: int | None, detail: str) -> None:
        """Count a dropped message; the first of its reason is logged in full, the
        others in a periodic summary (see `LogSummary`)."""
        if reason not in self.rejected:
            reason = "other"
        self.rejected[reason] += 1
        who = "unknown simulation" if sim is None else f"simulation {sim}"
        self.log.event(REJECTED, reason, sim, f"dropped a message from {who} ({reason}): {detail}")

    # -- in-progress samples, finishing ------------------------------------------------------

    def _new_assembly(self, key: tuple[int, int], sim: SimulationLedger) -> Assembly:
        pending = self.pending
        while pending and (
            len(pending) >= self._max_pending
            or self._pending_bytes + sim.sample_nbytes > self._max_pending_bytes
        ):
            old_key = next(iter(pending))  # the oldest
            self.drop_pending([old_key], lost=True)
            detail = (
                f"dropped the incomplete sample of simulation {old_key[0]} step {old_key[1]}: "
                f"more than {self._max_pending} samples or {self._max_pending_bytes} bytes "
                "in progress (max_pending, max_pending_bytes)"
            )
            self.log.event(INCOMPLETE, "pending_bound", old_key[0], detail)
        asm = pending[key] = Assembly(sim)
        self._pending_bytes += asm.nbytes
        return asm

    def drop_pending(self, keys: Iterable[tuple[int, int]], lost: bool = False) -> None:
        for key in keys:
            asm = self.pending.pop(key)
            self._pending_bytes -= asm.nbytes
            self.incomplete_dropped += 1
            if lost:  # counts as done for finishing; accepted if re-sent
                asm.record.lost.add(key[1] // self.world)

    def check_finished(self, sim: SimulationLedger) -> None:
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

    # -- telemetry, checkpoint (the record: :mod:`.ingest_state`) -----------------------------

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
        steps received (`SimulationLedger.to_state`), the finished simulations archived
        (`Archive.to_state`: two arrays), the simulations given up, the study's schema,
        the counters, and the keys of the last samples put (``recent``): the trainer
        snapshots the buffer before this record, so the samples recorded after the
        buffer's snapshot are forgotten at `load_state_dict` and accepted again when
        re-sent. Per rank: each receiver's own (see `ingest_state`). Called by the
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
            int(s): SimulationLedger.from_state(int(s), rec)
            for s, rec in state["simulations"].items()
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
        self.nonfinite.refused = counters.get("nonfinite_refused", 0)  # (absent before)
        self.rejected.update({r: counters.get(f"rejected_{r}", 0) for r in REJECT_REASONS})
        self.abandoned = {int(s) for s in state.get("abandoned", [])}
        self.replaced = {int(s) for s in state.get("replaced", [])}
        self.schema.load_json(state.get("schema"))
        self._forget_after(int(state["marked"]), buffer_put)

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
