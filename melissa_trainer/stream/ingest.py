"""The receiver's core, without sockets or threads: validate, dedup, reassemble, put.

:class:`Ingest` takes decoded messages (HELLO, DATA, BATCH, BYE, ABANDON) and turns them
into samples, each (simulation, time step) once, handed to a `put` callable; every
decision on a message is here, and every decision is documented in
:mod:`melissa_trainer.stream.receiver`. What it knows (the ledgers, the finished
simulations, the counters), how a simulation finishes and the checkpoint record are its
base class's, `ingest_state.IngestState`, the one owner of that state; its bookkeeping
per simulation is in `assembly`, its finished simulations in `archive`; the words of a
HELLO refused for its routing in `hello_routing`.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from melissa_trainer.common.words import plural
from melissa_trainer.stream.assembly import (
    COMPLETE,
    DUPLICATE,
    OVERLAP,
    Assembly,
    block_of,
    check_hello,
    payload_array,
)
from melissa_trainer.stream.finite import FLOAT_KINDS, all_finite
from melissa_trainer.stream.hello_routing import routing_differs
from melissa_trainer.stream.ingest_state import IngestState
from melissa_trainer.stream.log_summary import INCOMPLETE, REJECTED
from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.stream.twin_causes import StudyStopping, ranks_disagree
from melissa_trainer.wire import Abandon, Batch, Bye, Data, Hello
from melissa_trainer.wire.routing import SIMULATION_STEP

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

__all__ = ["Ingest"]


class Ingest(IngestState):
    """Messages in, samples out (see the module docstring); constructed with
    `IngestState`'s arguments, which holds what it knows.

    Called by one thread, the ingester (the receiver's pump or its thread).
    """

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
        sim.count_message()
        if t >= self._max_time_step:
            return self.reject("bad_step", sid, f"time step {t} >= {self._max_time_step}")
        i = t
        if self.world != 1:
            i, r = divmod(t, self.world)
            if sid in self.shifted:  # routed (s + t) % W (`wire.routing`)
                r = (r + sid) % self.world
            if r != self.rank:
                how = "(s + t)" if sid in self.shifted else "t"
                return self.reject("wrong_receiver", sid, f"time step {t}: {how} % W is {r}")
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
                if self.nonfinite.refuse(sim, t, i, name):
                    self._refused_step(sim)
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
                    if self.nonfinite.refuse(sim, t, i, bad):
                        self._refused_step(sim)
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

    def _refused_step(self, sim: StepLedger) -> None:
        """A step of `sim` refused and marked (never put): counted as put for receipts
        (`ingested`); `sim` finished if it was its last step awaited."""
        self.draining.refused(sim.simulation_id)
        if len(sim.byes) >= sim.client_count:
            self.check_finished(sim)

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
            said = f"BATCH of {plural(msg.records, 'step')} before HELLO"
            return self.reject("no_hello", sid, said)
        if msg.records > self.recent_spare:  # (all its keys, if the snapshot lacks them all)
            self.keep_recent(msg.records)
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
            self.draining.start(sid, sim.completed)  # (its puts, its refusals: `ingested`)
            for i in range(msg.records):
                self.data(msg.record(i), True)
            return None
        name, w = msg.name, self.world
        st = msg.steps.tolist()
        first, k = st[0], len(st)
        shift = sid % w if sid in self.shifted else 0  # its routing's (`wire.routing`)
        if (  # the usual batch: the next steps of this receiver, in order, all new
            (first + shift) % w == self.rank
            and first // w >= sim.frontier
            and st[-1] < self._max_time_step
            and st == list(range(first, first + k * w, w))
            and not (self.pending and any((sid, t) in self.pending for t in st))
        ):
            sim.count_message()
            self.draining.start(sid, sim.completed)  # (before the marks: `ingested`)
            # Recorded before the puts, in put order (see `data`), all at once.
            sim.mark_range(first // w, first // w + k)
            self.recent.extend_steps(sid, st)
            self.marked += k
            self.in_flight = k
            block = block_of(name, rows, sim, msg.steps.astype(np.int64))
            self.samples_put += self._put_many(block)
            self.in_flight = 0
        else:
            self._batch_any(msg, sim, rows)
        if len(sim.byes) >= sim.client_count:
            self.check_finished(sim)
        return None

    def _batch_any(self, msg: Batch, sim: StepLedger, rows: np.ndarray) -> None:
        """A batch of whole fields in any order, possibly with steps seen before: one
        vectorized dedup; any other batch goes record by record through `data`."""
        sid = msg.simulation_id
        steps = msg.steps.astype(np.int64)  # >= 2**63 wraps negative: caught below
        w = self.world
        local = steps if w == 1 else steps // w
        shift = sid % w if sid in self.shifted else 0  # its routing's (`wire.routing`)
        fast = (
            int(steps.min()) >= 0
            and int(steps.max()) < self._max_time_step
            and (w == 1 or not np.any((steps % w + shift) % w != self.rank))
            and not (self.pending and any((sid, t) in self.pending for t in steps.tolist()))
            and np.unique(steps).size == steps.size  # none twice
        )
        if not fast:
            for i in range(msg.records):
                self.data(msg.record(i), True)
            return
        sim.count_message()
        done = np.frombuffer(sim.done, np.uint8)
        byte = local >> 3
        seen = np.zeros(steps.size, bool)
        known = byte < done.size
        seen[known] = (done[byte[known]] >> (local[known] & 7)) & 1 == 1
        del done  # mark_many may resize the bytearray: no export may be alive
        new = np.flatnonzero(~seen)
        self.duplicates += steps.size - new.size
        self.draining.start(sid, sim.completed)  # (before the marks: `ingested`)
        # Recorded before the puts, in put order (see `data`), all at once.
        sim.mark_many(local[new])
        new_steps = steps[new].tolist()
        self.recent.extend_steps(sid, new_steps)
        self.marked += len(new_steps)
        self.in_flight = len(new_steps)
        block = block_of(msg.name, rows[new], sim, steps[new])
        self.samples_put += self._put_many(block)
        self.in_flight = 0

    def hello(self, hello: Hello) -> None:
        reason = check_hello(hello, self._max_field_bytes)
        if reason is not None:
            return self.reject(reason, hello.simulation_id, "reserved or oversized field")
        sid = hello.simulation_id
        if hello.run_id is not None and self.run_id is not None and hello.run_id != self.run_id:
            # Before anything else: another run's simulation must not revive, or start,
            # a ledger under an id that this run's simulations use too.
            # Remembered (bounded) for an older client's ADMISSION_QUERY, which names
            # no run: answered refused at once instead of unknown until it gives up.
            self.refuse_other_run(sid, hello.run_id)
            return self.reject(
                "wrong_run",
                sid,
                f"HELLO of run {hello.run_id}, this receiver serves run {self.run_id}: a "
                f"simulation of another trainer (a stale rendezvous or endpoint?); its "
                f"messages are dropped",
            )
        # a known simulation's HELLO (a first one sets the routing) keeps its routing
        first = SIMULATION_STEP if sid in self.shifted else None
        known = sid in self.sims or sid in self.archive
        why = routing_differs(hello, self.world, first) if known else None
        if why is not None:
            if sid in self.sims and not self.sims[sid].finished:  # (the launcher fails it
                self.refused.append((sid, why))  # with these words: it cannot complete)
            return self.reject("hello_mismatch", sid, why)
        # admitted as listed; every ledger built in the study's order (`StudySchema`)
        listed = list(hello.parameters)
        hello = replace(hello, parameters=self.schema.arrange(hello.parameters))
        if sid in self.archive:  # runs again (resumed): a ledger, finished, as before,
            self.sims[sid] = self.archive.revive(hello)  # then the path of any HELLO of
            self.archive.finished(sid, self.marked)  # a known ledger (its attempt counted)
        sim = self.sims.get(sid)
        if sim is not None and hello.client_count != sim.client_count:
            return self._ranks_disagree(sim, hello)  # (finished or not: either order)
        if sim is not None and sim.finished:  # (said: `run_again`; its steps duplicates)
            self.run_again.hello(sid, sim.completed)
        why = None if sim is not None else self.schema.admit(hello.fields, listed)
        if why is not None:
            self.refused.append((hello.simulation_id, why))
            return self.reject("schema_mismatch", hello.simulation_id, why)
        attempt = self.nonfinite.attempt(sid)
        self.nonfinite.hello(sid, hello.client_rank)  # a new attempt: checked afresh
        if sim is None:
            self.sims[hello.simulation_id] = StepLedger.from_hello(hello)
            if hello.routing == SIMULATION_STEP:
                self.shifted.add(sid)
            logger.debug("simulation %d: HELLO of rank %d", hello.simulation_id, hello.client_rank)
        elif not sim.same_declaration(hello):
            self.reject("hello_mismatch", hello.simulation_id, "HELLO differs from the first")
        else:
            if self.nonfinite.attempt(sid) > attempt:  # (a receipt asked by the last one
                sim.asked.clear()  # is not this one's: `connection_lines.lost`)
            sim.order_parameters_as(hello.parameters)
            if hello.client is not None:  # (a ledger loaded from a checkpoint knew none)
                sim.client = hello.client
        return None

    def _ranks_disagree(self, sim: StepLedger, hello: Hello) -> None:
        """A HELLO whose rank count is not its simulation's first: its ranks disagree on
        their communicator (`twin_causes.ranks_disagree`). Refused, and listed in
        `refused` once per simulation as `StudyStopping` (a study's launcher stops the
        study at once: its solver does so in every simulation, and a rank built on the
        communicator hangs). Said at once, whichever HELLO came first: on rank 0 at
        WARNING (every client rank says HELLO to every receiver), elsewhere at DEBUG."""
        sid = hello.simulation_id
        why = ranks_disagree(hello.client_rank, sim.client_count, hello.client_count)
        if not any(s == sid and isinstance(w, StudyStopping) for s, w in self.refused):
            self.refused.append((sid, why))  # (a rare path: the scan costs nothing)
            level = logging.WARNING if self.rank == 0 else logging.DEBUG
            logger.log(level, "simulation %d refused: %s", sid, why)
        counts = f"rank count {hello.client_count}, its first HELLO {sim.client_count}"
        self.reject("hello_mismatch", sid, f"HELLO says {counts}")

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

    def reject(self, reason: str, sim: int | None, detail: str) -> None:
        """Count a dropped message; the first of its reason is logged in full, the
        others in a periodic summary (see `LogSummary`)."""
        if reason not in self.rejected:
            reason = "other"
        self.rejected[reason] += 1
        who = "unknown simulation" if sim is None else f"simulation {sim}"
        self.log.event(REJECTED, reason, sim, f"dropped a message from {who} ({reason}): {detail}")

    # -- in-progress samples, finishing ------------------------------------------------------

    def _new_assembly(self, key: tuple[int, int], sim: StepLedger) -> Assembly:
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
