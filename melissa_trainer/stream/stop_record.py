"""The stop record: what a receiver that stopped would have answered closing clients,
written into its rendezvous file as it stops (docs/protocol.md, section 17b).

A closing client in external mode returns only once every receiver confirms, on its
follow socket, that it ingested this client rank's BYE (`melissa_trainer.client.confirm`).
A trainer that ingests the last BYE and stops within the few milliseconds before the
client's first RECEIPT_QUERY leaves nobody to answer it: without more, the client waits
``disconnected_timeout`` + ``follow_timeout`` seconds and fails although nothing was
lost. So `Receiver.stop`, once its ingest has stopped (nothing changes any more), writes
into its rendezvous file, in the same rename that marks it stopped
(`endpoints.mark_stopped`), the receipts it would have given and why it stopped:

``"stop_record": {"version": 1, "run_id", "reason": {"code", "message"[,
"simulation_id", "time_step"]}, "finished": [[sid, steps, nonfinite], ...], "byes":
[[sid, client_rank, count, steps, nonfinite], ...], "complete": bool[, "unfinished":
[[sid, steps, nonfinite, first, last], ...]][, "launch": string][,
"expected_end": {"expected_simulations", "finished", "abandoned", "unfinished": [[sid,
steps, nonfinite], ...]}]}``

* ``finished``: the last `RECORD_LIMIT` simulations that finished here (every rank's BYE
  and every step in), oldest first, with the steps held and the samples refused as
  non-finite (the RECEIPT's ``steps`` and ``nonfinite``);
* ``byes``: the BYEs ingested of simulations not finished here (a client rank's BYE and
  the count it carried), at most `RECORD_LIMIT`;
* ``complete``: false when a list was cut to its bound (a client absent from an
  incomplete record is not told that the trainer lacks its BYE: it waits as before);
* ``unfinished``: the simulations begun here, not finished and not given up (their
  BYE, or a rank's, not read), with the steps held of each and those refused as
  non-finite, and the first and last time step held (0 and 0 when none), at most
  `RECORD_LIMIT` (the lowest ids; a cut leaves ``complete`` as it is: a client absent
  from it is told what it was told before). Absent when a step marked may not have
  reached the buffer (a put the stop interrupted, samples left in the feeder's
  overflow: `build_record`). A client whose run ended (``end``) before its BYE was
  read learns from it whether every step it sent was taken: the steps held are as many
  as it sent there, and the first and last are the least and greatest it sent there
  (the steps held count every run of the simulation, a run resumed from a restart
  file too: a count alone would let an earlier run's steps stand for this run's lost
  ones). Then nothing was lost, and its close returns with a warning. Absent from an
  older record, or rows of 3 (an older trainer's): the close then fails as it did;
* ``expected_end``: present when the stream ended here because ``expected_simulations``
  simulations had ended (finished or abandoned): that bound, the counts, and the
  simulations begun here and not finished (the steps held of each, at most
  `RECORD_LIMIT`). A client absent from the record then learns that the study ended
  without needing it (a solver started beyond ``expected_simulations``), and what was
  taken of it, rather than that the trainer failed (`client.stopped`);
* ``reason.code``: one of `REASON_CODES`: ``end`` (the run ended: end of stream,
  ``max_steps``, a hook), ``preempted`` (a signal: a resumed trainer will follow),
  ``broken`` (a collective broke with every peer alive on this host: a network error, a
  collective's timeout; no signal, but a resumed trainer may follow, as one preempted),
  ``nonfinite`` (a sample holding NaN or Inf under ``nonfinite="fail"``: the simulation
  and time step are named), ``error`` (training failed), ``stopped`` (stopped by its
  owner, reason not given). ``message`` is a sentence for people;
* ``reason.restarts_left``: of ``error`` only, and only when the worker knows it (run
  by torchrun or ``accelerate launch`` with ``--max_restarts``:
  `launch_restarts.restarts_left`): how many more times the launcher restarts the
  failed run; 0 where a restart would not resume (the trainer's command lacks
  ``resume_from_checkpoint``, or its ``output_dir`` is gone: `Receiver.restarts_resume`,
  set through `Source.note_restarts_resume`). More than 0: the launcher restarts it and
  it resumes, so a client treats the ``error`` as ``preempted`` (`resumable`). Absent:
  0. A value that is not an integer from 0 to `MAX_RESTARTS_LEFT` is read as 0, with a
  word (`restarts_fault`). Never of ``nonfinite``, which is final whatever restarts are
  left (a record that says some is read as saying none, in both clients): the stop is
  the data's, not the run's; a restart runs the same command, under the same policy,
  from the last checkpoint, which precedes the sample, so the simulation is taken again
  (a study reruns it; a solver that followed would send the steps the checkpoint lacks),
  a deterministic solver's sample holds the same NaN or Inf, and the restarted run stops
  on it again: solvers would wait ``follow_timeout`` for another failure (a solver with
  random forcing may not blow up twice; a blow-up still wants a person's look first).
  The fix is a person's (the solver, or ``nonfinite="refuse"``), then a resume. A
  restart the launcher makes anyway ends before its set-up (`final_stop`,
  `trainer.final_restart`).
* ``launch``: the torchrun launch that wrote it (`launch_identity`: an id the launcher's
  store holds for the launch, shared by its restarts), absent without one (no agent
  store: ``python train.py``). A restart reads and rewrites only the records of its own
  launch (`final_stop`, `restart_failed`); clients ignore it.

At most about 5 * `RECORD_LIMIT` * 40 bytes (800 KiB). Plain JSON, read without
unpickling anything (`stop_record_read.parse_record`: every field checked, sizes
bounded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from melissa_trainer.stream.launch_identity import LAUNCH_FIELD, this_launch
from melissa_trainer.stream.launch_restarts import restarts_left
from melissa_trainer.stream.nonfinite import NonFiniteDataError

__all__ = [
    "RECORD_KEY",
    "RECORD_LIMIT",
    "REASON_CODES",
    "MAX_MESSAGE",
    "MAX_RESTARTS_LEFT",
    "RESUMABLE",
    "StopReason",
    "StopRecord",
    "ExpectedEnd",
    "build_record",
    "reason_of",
    "restarts_fault",
    "resumable",
]

#: the rendezvous file's key holding the record
RECORD_KEY = "stop_record"
RECORD_VERSION = 1
#: the most finished simulations, and the most BYEs of unfinished ones, in a record
RECORD_LIMIT = 4096
#: why a receiver stopped (the module docstring)
REASON_CODES = ("end", "preempted", "nonfinite", "error", "stopped", "broken")
#: the codes after which a resumed trainer may follow: a client waits for it and follows
#: it, reading no receipt in the record (its checkpoint may lack what the record holds)
RESUMABLE = ("preempted", "broken")
#: the most restarts left a record may say (a C int's bound: clients/c/src/stop_record.c)
MAX_RESTARTS_LEFT = 2**31 - 1
#: the most characters of a reason's message
MAX_MESSAGE = 4096


@dataclass(frozen=True)
class StopReason:
    """Why a receiver stopped: a code of `REASON_CODES` and a sentence; for
    ``nonfinite``, the simulation and time step whose sample stopped it."""

    code: str = "stopped"
    message: str = "the receiver was stopped by its owner"
    simulation_id: int | None = None
    time_step: int | None = None
    #: of ``error``: how many more times the launcher restarts the run (None: not known,
    #: not written; read: absent or invalid is 0)
    restarts_left: int | None = None


def resumable(reason: StopReason) -> bool:
    """Whether a resumed trainer may follow a stop for `reason`: a `RESUMABLE` code, or
    ``error`` with restarts left (the launcher restarts the run, which resumes)."""
    return reason.code in RESUMABLE or (reason.code == "error" and bool(reason.restarts_left))


def restarts_fault(said: dict[str, Any]) -> str | None:
    """What is wrong with the reason `said`'s ``restarts_left`` (read as 0 then), in the
    C client's words too; None when it is absent or an integer from 0 to
    `MAX_RESTARTS_LEFT`."""
    if "restarts_left" not in said:
        return None
    left = said["restarts_left"]
    if isinstance(left, int) and not isinstance(left, bool) and 0 <= left <= MAX_RESTARTS_LEFT:
        return None
    return (
        f"its restarts_left is not an integer from 0 to {MAX_RESTARTS_LEFT}: read as 0, "
        f"no restart of the failed run expected"
    )


def reason_of(error: BaseException | None, noted: StopReason | None) -> StopReason:
    """The reason a receiver records: its own failure first (non-finite data under
    ``nonfinite="fail"``, any other error), else what its owner noted (`noted`: the
    trainer's, through `Source.note_stop`), else ``stopped``."""
    if isinstance(error, NonFiniteDataError):
        return StopReason("nonfinite", str(error), error.simulation_id, error.time_step)
    if error is not None:
        return StopReason("error", f"the receiver failed: {error!r}"[:MAX_MESSAGE])
    return StopReason() if noted is None else noted


@dataclass(frozen=True)
class ExpectedEnd:
    """The stream ended on ``expected_simulations`` (the record's ``expected_end``)."""

    expected_simulations: int
    finished: int
    abandoned: int
    #: simulation id -> (steps held, samples refused as non-finite), of those begun
    #: here and not finished
    unfinished: dict[int, tuple[int, int]]


@dataclass(frozen=True)
class StopRecord:
    """A parsed stop record (`parse_record`)."""

    run_id: str | None
    reason: StopReason
    #: simulation id -> (steps held, samples refused as non-finite)
    finished: dict[int, tuple[int, int]]
    #: (simulation id, client rank) -> (the BYE's count, steps held, refused)
    byes: dict[tuple[int, int], tuple[int, int, int]]
    complete: bool
    #: None unless the stream ended on ``expected_simulations`` (or an older record)
    expected_end: ExpectedEnd | None = None
    #: simulation id -> (steps held, refused as non-finite), of those begun here and not
    #: finished (None: an older record, without the field)
    unfinished: dict[int, tuple[int, int]] | None = None
    #: simulation id -> (first, last time step held), of the rows of ``unfinished`` that
    #: say them (an older trainer's rows of 3 do not: nothing is confirmed by them)
    unfinished_span: dict[int, tuple[int, int]] | None = None


def build_record(
    ingest: Any, run_id: str | None, reason: StopReason, held: bool = True
) -> dict[str, Any]:
    """The record of `ingest` (an `IngestState`), JSON-ready (module docstring); with
    ``unfinished`` only if `held` (the receiver knows that every step marked reached
    its buffer: a put interrupted by the stop, or refused by a closed buffer, leaves
    ``completed`` over the steps held, and a close must not be told it lost nothing).

    Its thread has stopped, or did not within the receiver's wait (`Receiver.stop`: a
    stuck ingester): then it may still change the ledgers while they are read here, so
    each dict iterated is copied first with `dict.copy`, which runs no Python code that
    could hand over to the ingester mid-copy (``list(d.items())`` allocates a tuple per
    entry: a collection may run a finalizer there, and the ingester add a ledger:
    "dictionary changed size during iteration"; `ingest_queries`)."""
    refused = ingest.nonfinite.by_simulation
    finished_ids = ingest.finished_ids[-RECORD_LIMIT:]
    finished = []
    for sid in finished_ids:
        ledger = ingest.sims.get(sid)
        steps = ingest.archive.steps.get(sid) if ledger is None else ledger.completed
        if steps is not None:
            finished.append([int(sid), int(steps), min(int(refused.get(sid, 0)), int(steps))])
    byes: list[list[int]] = []
    complete = len(finished_ids) == len(ingest.finished_ids)
    for sid, ledger in ingest.sims.copy().items():
        if ledger.finished:
            continue
        steps = int(ledger.completed)
        bad = min(int(refused.get(sid, 0)), steps)
        for rank, count in sorted(ledger.byes.copy().items()):
            if len(byes) >= RECORD_LIMIT:
                complete = False
                break
            byes.append([int(sid), int(rank), int(count), steps, bad])
    expected_end, cut = _expected_end(ingest, refused)
    unfinished = (
        _held(ingest, ingest.unfinished()[:RECORD_LIMIT], refused, spans=True) if held else None
    )
    said: dict[str, Any] = {"code": reason.code, "message": reason.message[:MAX_MESSAGE]}
    if reason.simulation_id is not None:
        said.update(simulation_id=reason.simulation_id, time_step=reason.time_step)
    left = reason.restarts_left if reason.restarts_left is not None else restarts_left()
    if reason.code == "error" and left is not None:  # (written only when known)
        said["restarts_left"] = min(left, MAX_RESTARTS_LEFT)
    record = {
        "version": RECORD_VERSION,
        "run_id": run_id,
        "reason": said,
        "finished": finished,
        "byes": byes,
        "complete": complete and not cut,
    }
    if this_launch() is not None:  # (which launch wrote it: a restart acts on its own)
        record[LAUNCH_FIELD] = this_launch()
    if unfinished is not None:
        record["unfinished"] = unfinished
    if expected_end is not None:
        record["expected_end"] = expected_end
    return record


def _expected_end(ingest: Any, refused: dict[int, int]) -> tuple[dict[str, Any] | None, bool]:
    """The record's ``expected_end`` (None: the stream did not end on
    ``expected_simulations``), and whether its list was cut to `RECORD_LIMIT`."""
    expected = ingest.expected
    if expected is None:
        return None, False
    finished, abandoned = int(ingest.simulations_finished), len(ingest.abandoned)
    if finished + abandoned < expected:
        return None, False
    unfinished = ingest.unfinished()
    rows = _held(ingest, unfinished[:RECORD_LIMIT], refused)
    said = {"expected_simulations": int(expected), "finished": finished,
            "abandoned": abandoned, "unfinished": rows}  # fmt: skip
    return said, len(unfinished) > RECORD_LIMIT


def _held(
    ingest: Any, ids: list[int], refused: dict[int, int], spans: bool = False
) -> list[list[int]]:
    """Rows ``[sid, steps held, refused as non-finite]`` of the simulations `ids`, with
    `spans` followed by the first and last time step held (`_span`)."""
    rows = []
    for sid in ids:
        ledger = ingest.sims.get(sid)
        steps = 0 if ledger is None else int(ledger.completed)
        row = [int(sid), steps, min(int(refused.get(sid, 0)), steps)]
        rows.append(row + list(_span(ingest, int(sid), ledger)) if spans else row)
    return rows


def _span(ingest: Any, sid: int, ledger: Any) -> tuple[int, int]:
    """The first and last time step `ledger` (`step_ledger.StepLedger`) holds, (0, 0) if
    none. Its bits are local steps ``t // W``; this receiver takes the steps ``t`` of one
    residue ``t % W`` of the simulation (its routing: `wire.routing.first_step`, as
    `Ingest` checks each DATA), so ``t = i * W + residue``."""
    done = np.frombuffer(b"" if ledger is None else bytes(ledger.done), np.uint8)
    used = np.flatnonzero(done)  # (bytes holding a step: O(steps / 8), no bit array)
    if used.size == 0:
        return 0, 0
    low, high = int(done[used[0]]), int(done[used[-1]])
    first = int(used[0]) * 8 + (low & -low).bit_length() - 1
    last = int(used[-1]) * 8 + high.bit_length() - 1
    world = int(ingest.world)
    shift = sid % world if sid in ingest.shifted else 0
    residue = (int(ingest.rank) - shift) % world
    return first * world + residue, last * world + residue
