"""A closing client whose trainer stopped: its receipts read from the stop record
(`melissa_trainer.stream.stop_record`; docs/protocol.md, section 17b).

A receiver that stops writes, into its rendezvous file and in the rename that marks it
stopped, the receipts it would have given and why it stopped; its ingest had stopped
before, so the record is final. `Rounds.wait` (`receipts`) asks `StopRecords.decide`,
for each receiver not confirmed yet, before its first question and after each round
that receiver did not answer. Read only when the file is marked stopped by the
endpoint the client streamed to and names the client's run; a file of another trainer
or another run is ignored, and so is a record that does not parse (a warning, once):
the close then waits as it does without a record.

What the record decides, by its reason (`StopReason.code`):

* ``preempted``, ``broken``, and ``error`` with restarts left (``restarts_left`` > 0:
  the launcher restarts the failed run, which resumes; `stop_record.resumable`):
  nothing (a resumed trainer will follow: the client waits for it and follows it, as
  without a record: the checkpoint it resumes from may lack the BYE);
* ``nonfinite`` naming this simulation: `SimulationRefused`, naming the time step, the
  policy and the fix (the trainer stopped on its sample: nothing is waited for);
* otherwise this rank's BYE in the record (the simulation finished there, or the BYE
  with the count it carried): confirmed, as by a RECEIPT saying so;
* not in it, the record complete, and the stream ended on ``expected_simulations``
  (``end`` with ``expected_end``: a solver started beyond the simulations the trainer
  was given): `SimulationNotNeeded` at once, saying that the study ended without
  needing it, what the trainer took of it, and what to do;
* not in it, the record complete, the run ended (``end``) and every step this rank
  sent there held (the record's ``unfinished``: as many steps held as it sent there,
  the first and last held the least and greatest it sent; a count alone would let an
  earlier run's steps stand for a restarted run's lost ones): confirmed, with a
  warning per receiver so confirmed (`taken_warning`: nothing was lost, what a resume
  of that run would need);
* not in it, the record complete and the trainer ended or failed (``end``, ``error``,
  ``nonfinite`` of another simulation): `TimeoutError` at once, naming why the trainer
  stopped (it never read this BYE: nothing would answer later) and, where the record
  says, how many of the steps sent it had taken;
* else (``stopped`` by its owner, or a record cut to its bound): nothing.

Not thread-safe: the closing thread.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from melissa_trainer import wire as protocol
from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.closing import TrainerStopped, client_logger
from melissa_trainer.client.gave_up import DeliveryFailed, StopSaid, rerun_words, taken_of
from melissa_trainer.client.stop_kinds import (
    ENDED,
    NOT_NEEDED,
    RESUMABLE_WORDS,
    TAKEN_RESUME,
    SimulationNotNeeded,
)
from melissa_trainer.stream.rank_bounds import read_file
from melissa_trainer.stream.reason_line import said_line
from melissa_trainer.stream.stop_record import RECORD_KEY, StopRecord, restarts_fault, resumable
from melissa_trainer.stream.stop_record_read import c_string, parse_record
from melissa_trainer.wire.receipt import RECEIPT_BYE, RECEIPT_FINISHED, ReceiptReply

__all__ = ["StopRecords"]

_FINAL = ("end", "error", "nonfinite")
#: the records whose invalid restarts_left this process has warned of, by file and run
#: id: said once per client process (its close's reads, its sends', a second client's:
#: one word), as the C client's (clients/c/src/restarts_word.c); a user reads one word
#: per record. The run id tells the records at one path apart: a trainer run again on
#: the same rendezvous directory starts a new run (a new run id) and writes its own
#: record there, which a long-lived client process (a worker, a notebook) reads too
_RESTARTS_WARNED: set[tuple[str, str | None]] = set()
#: (the check and the add as one: two clients' threads reading one record say it once)
_RESTARTS_LOCK = threading.Lock()


def _restarts_word_first(path: Path, run_id: str | None) -> bool:
    """Whether this is the process's first word of the record of run `run_id` at
    `path` (then marked said); thread-safe."""
    key = (str(path), run_id)
    with _RESTARTS_LOCK:
        if key in _RESTARTS_WARNED:
            return False
        _RESTARTS_WARNED.add(key)
        return True


class StopRecords:
    """The stop records of one run's receivers, read from their rendezvous files when
    those change (a stat per call otherwise)."""

    def __init__(
        self,
        rendezvous: str,
        endpoints: list[str],
        run_id: str | None,
        simulation_id: int,
        client_rank: int,
        whose: str,
    ) -> None:
        self.rendezvous, self.endpoints, self.run_id = rendezvous, endpoints, run_id
        self.simulation_id, self.client_rank, self.whose = simulation_id, client_rank, whose
        self._seen: dict[int, tuple[int, int, int]] = {}
        self._records: dict[int, StopRecord | None] = {}
        # the ranks warned of an invalid record, as the C client's flag (close_checks.h
        # ``mt_stop_look``: ``warned``); an invalid restarts_left: `_RESTARTS_WARNED`
        self._warned: set[int] = set()

    def record(self, rank: int) -> StopRecord | None:
        """Receiver `rank`'s record if its file is marked stopped by the client's trainer
        (its endpoint) with a valid record of the client's run; else None."""
        path = Path(self.rendezvous) / f"rank_{rank}.json"
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._seen.get(rank) != key:
            self._seen[rank] = key
            self._records[rank] = self._read(rank, path)
        return self._records.get(rank)

    def _read(self, rank: int, path: Path) -> StopRecord | None:
        try:
            # (the bytes C's close reads, read as C reads them: `rank_bounds.read_file`)
            entry = read_file(path)
        except (OSError, ValueError):
            return None  # (being replaced, or not ours: the receiver's silence decides)
        if entry.get("stopped") is not True:
            return None
        # (its endpoint as C reads it, up to a NUL: both clients take the same files)
        if c_string(entry.get("endpoint")) != self.endpoints[rank] or RECORD_KEY not in entry:
            return None  # (another trainer's file, or an older trainer: no record)
        try:
            record = parse_record(entry[RECORD_KEY])
        except ValueError as exc:
            if rank not in self._warned:
                self._warned.add(rank)
                client_logger().warning(
                    "%s: the stop record in %s is not valid (%s): ignored, the close waits "
                    "for the trainer as without one",
                    self.whose, path, exc,
                )  # fmt: skip
            return None
        if record.run_id != self.run_id:
            return None
        fault = restarts_fault(entry[RECORD_KEY]["reason"])
        if (
            fault is not None
            and record.reason.code == "error"
            and _restarts_word_first(path, record.run_id)
        ):  # (the C client's words: stop_record.c)
            client_logger().warning("%s: the stop record in %s: %s", self.whose, path, fault)
        return record

    def refusal(self, rank: int, record: StopRecord) -> str:
        """What a simulation whose non-finite sample stopped the trainer is told."""
        sid = self.simulation_id
        return f"simulation {sid}: {self._refused_at(record)}: {self._refused(rank, record)}"

    @staticmethod
    def _refused_at(record: StopRecord) -> str:
        """The opening of `refusal`: where the trainer stopped."""
        return f"the trainer stopped on its time step {record.reason.time_step}"

    def _refused(self, rank: int, record: StopRecord) -> str:
        """The rest of `refusal`: why, and what to do."""
        reason, sid = record.reason, self.simulation_id
        return (
            f"it holds NaN or Inf, and the trainer's policy is nonfinite='fail' (its receiver "
            f"{rank}: {reason.message}). Fix the solver (a diverging scheme: a smaller time "
            f"step?), or start the trainer with --nonfinite refuse "
            f"(ReceiverConfig(nonfinite='refuse')) to drop such samples and go on; then "
            f"resume it (--resume_from_checkpoint latest) and {rerun_words(sid)}"
        )

    def _not_needed(self, record: StopRecord) -> bool:
        """The record (this simulation not finished in it) says that the stream ended on
        ``expected_simulations``, and it is complete: the study ended without it."""
        return record.complete and record.reason.code == "end" and record.expected_end is not None

    def not_needed(self, rank: int, record: StopRecord) -> str:
        """What a simulation the study ended without is told (`SimulationNotNeeded`),
        after who it is."""
        return f"{NOT_NEEDED}: {self._not_needed_facts(rank, record)}"

    def _not_needed_facts(self, rank: int, record: StopRecord) -> str:
        """`not_needed` after its opening: the counts, what was taken, what to do."""
        ended = record.expected_end
        assert ended is not None  # (`_not_needed`)
        steps, refused = ended.unfinished.get(self.simulation_id, (0, 0))
        taken = (
            f"its receiver {rank} had taken {steps} of this simulation's time steps (trained "
            f"on{f'; {refused} refused as non-finite' if refused else ''}) and ignored the "
            f"rest"
            if steps
            else f"its receiver {rank} had taken nothing of this simulation"
        )
        return (
            f"the trainer was given expected_simulations={ended.expected_simulations} and "
            f"that many had ended ({ended.finished} finished, {ended.abandoned} abandoned), "
            f"so it stopped ({record.reason.code}: {record.reason.message}; its stop record in "
            f"{self.rendezvous}); {taken}. Nothing failed: if you started more solvers "
            f"than the trainer needed, there is nothing to do (catch SimulationNotNeeded "
            f"to exit 0). To train on every solver you start, give the trainer "
            f"expected_simulations equal to their number "
            f"(ReceiverConfig(expected_simulations=N)) before you start them"
        )

    def _taken(
        self, record: StopRecord, count: int, span: tuple[int, int] | None
    ) -> tuple[int, int] | None:
        """The steps held of this simulation and those refused (the record's
        ``unfinished``), if its run ended (``end``, complete, not on expected_simulations)
        having taken all `count` steps this rank sent there, the least and greatest of
        them `span` (None: none sent): the steps held as many, the first and last held
        those (the same set, in practice: a rerun re-sending steps held sends the same
        range, one sending others differs); else None. A row without its first and last
        (an older trainer's) confirms nothing."""
        if record.reason.code != "end" or not record.complete or record.unfinished is None:
            return None
        if record.expected_end is not None:  # (`not_needed`'s words)
            return None
        sid = self.simulation_id
        held, held_span = record.unfinished.get(sid), (record.unfinished_span or {}).get(sid)
        if held is None or held_span is None or held[0] != count:
            return None
        return held if count == 0 or held_span == span else None

    def all_taken(self, counts: list[int], spans: list[tuple[int, int] | None]) -> bool:
        """Whether every receiver's record (`counts`: the steps this rank sent each, in
        rank order; `spans`: the least and greatest of them) says that the run ended
        having taken every step sent it (`_taken`): a BYE not delivered then lost
        nothing, and the close asks the receipts (`decide`), which confirm it. (A
        simulation listed finished is not enough: an earlier run of it, this one's
        messages undelivered.)"""
        for rank, count in enumerate(counts):
            record = self.record(rank)
            if record is None or self._taken(record, count, spans[rank]) is None:
                return False
        return bool(counts)

    def taken_warning(self, rank: int, record: StopRecord, count: int) -> str:
        """What a close confirmed by `_taken` warns (the C client's words too)."""
        reason = record.reason
        return (  # (what happened, nothing lost, what a resume needs: no more)
            f"{self.whose}: the trainer's receiver {rank} ({self.endpoints[rank]}) stopped "
            f"({reason.code}: {reason.message}) before it read this simulation's BYE, having "
            f"taken every time step sent it ({count}): nothing was lost. "
            f"{TAKEN_RESUME.format(rerun=rerun_words(self.simulation_id))}"
        )

    def for_good(self) -> StopSaid | None:
        """Why the trainer is not coming back, if a receiver's record says that it ended
        or failed (not preempted): its parts (`gave_up.StopSaid`), from which a close
        whose messages cannot be delivered composes what it raises (the error:
        `SimulationRefused` if this simulation's non-finite sample stopped it,
        `SimulationNotNeeded` if the study ended without it, else `TrainerStopped`);
        else None."""
        for rank in range(len(self.endpoints)):
            record = self.record(rank)
            if record is None or record.reason.code not in _FINAL or resumable(record.reason):
                continue
            reason, endpoint = record.reason, self.endpoints[rank]
            if reason.code == "nonfinite" and reason.simulation_id == self.simulation_id:
                return StopSaid(
                    endpoint, "refused", self._refused_at(record), self._refused(rank, record),
                    SimulationRefused,
                )  # fmt: skip
            if self._not_needed(record):
                return StopSaid(
                    endpoint, "not_needed", NOT_NEEDED, self._not_needed_facts(rank, record),
                    SimulationNotNeeded,
                )  # fmt: skip
            sid = self.simulation_id
            held = None if record.unfinished is None else record.unfinished.get(sid)
            return StopSaid(
                endpoint,
                "ended",
                f"{reason.code}: {reason.message}; its stop record in {self.rendezvous}",
                ENDED
                if reason.code == "end"
                else f"Once a trainer runs there again (--resume_from_checkpoint latest), "
                f"{rerun_words(self.simulation_id)}: the trainer takes "
                f"the steps it lacks, each once",
                TrainerStopped,
                None if held is None else held[0],
                (record.unfinished_span or {}).get(sid),
            )
        return None

    def preempted(self) -> str | None:
        """What a receiver's record says when its trainer was preempted (``preempted``,
        ``broken``, or ``error`` with restarts left: "the trainer failed and its launcher
        restarts it: a restart is expected (N left) (...)"; a resumed trainer may
        follow, so the close still waits): "the
        trainer was preempted (MESSAGE; its stop record in DIR)", MESSAGE the first line of
        the record's, at most 200 characters (`said_line`) (``broken``: "the trainer
        stopped on a broken collective, a resume may follow (...)"), the words a close's notice and
        its error say in place of "the trainer died" (`closing`); else None."""
        for rank in range(len(self.endpoints)):
            record = self.record(rank)
            if record is not None and resumable(record.reason):
                what = RESUMABLE_WORDS[record.reason.code].format(n=record.reason.restarts_left)
                said = said_line(record.reason.message)  # (C: the same characters)
                return f"{what} ({said}; its stop record in {self.rendezvous})"
        return None

    def decide(
        self, rank: int, count: int, span: tuple[int, int] | None = None
    ) -> ReceiptReply | None:
        """What receiver `rank`'s record says of this rank's BYE, which carried `count`
        (module docstring; `span`: the least and greatest of the steps it counts, None
        if none): the receipt it confirms, or None (undecided).

        Raises:
            SimulationRefused: the trainer stopped on a non-finite sample of this
                simulation.
            TimeoutError: the trainer ended or failed without reading this BYE.
        """
        record = self.record(rank)
        if record is None or resumable(record.reason):
            return None
        reason, sid = record.reason, self.simulation_id
        if reason.code == "nonfinite" and reason.simulation_id == sid:
            raise SimulationRefused(self.refusal(rank, record))
        said = record.finished.get(sid)
        if said is not None:
            return self._reply(rank, RECEIPT_FINISHED, said[0], 0, said[1])
        bye = record.byes.get((sid, self.client_rank))
        if bye is not None and bye[0] == count:
            return self._reply(rank, RECEIPT_BYE, bye[1], bye[0], bye[2])
        if self._not_needed(record):
            raise SimulationNotNeeded(f"{self.whose}: {self.not_needed(rank, record)}")
        taken = self._taken(record, count, span)
        if taken is not None:  # (the run ended, every step sent taken: nothing lost)
            client_logger().warning(self.taken_warning(rank, record, count))
            return self._reply(rank, RECEIPT_BYE, taken[0], count, taken[1])
        if record.complete and reason.code in _FINAL:
            held = None if record.unfinished is None else record.unfinished.get(sid)
            held_span = (record.unfinished_span or {}).get(sid)
            of = taken_of(None if held is None else held[0], held_span, count, span)
            stop = (
                f"{self.whose}: its BYE was not confirmed: the trainer's receiver {rank} "
                f"({self.endpoints[rank]}) stopped before it read it ({reason.code}: "
                f"{reason.message}; its stop record in {self.rendezvous} lacks this BYE{of}). "
            )
            if reason.code == "end":  # (a resume only after a max_steps end: `ENDED`)
                raise DeliveryFailed(stop + ENDED)
            raise DeliveryFailed(
                f"{stop}What this simulation sent after the trainer's last checkpoint is not "
                f"trained on: once a trainer runs there again (--resume_from_checkpoint "
                f"latest), {rerun_words(sid)}: the trainer takes the steps it "
                f"lacks, each once"
            )
        return None

    def _reply(self, rank: int, bye: int, steps: int, bye_steps: int, refused: int) -> ReceiptReply:
        return ReceiptReply(
            self.simulation_id, 0, rank, len(self.endpoints), protocol.ADMISSION_ACCEPTED,
            bye, "", steps, bye_steps, refused,
        )  # fmt: skip
