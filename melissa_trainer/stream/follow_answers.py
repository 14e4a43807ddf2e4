"""What a receiver's follow socket (`follow_server.FollowServer`) answers of a simulation,
read live from the receiver's ingest (`Admissions`) by the follow thread while the
ingester runs: its ADMISSION (`admission_of`: accepted, refused and why, or not known
yet) and its RECEIPT (`receipt_of`: the admission, the asking client rank's BYE, the
steps held, the samples refused as non-finite). docs/protocol.md, sections 17a and 17b.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from melissa_trainer import wire as protocol
from melissa_trainer.stream.ingest_state import wrong_run_reason
from melissa_trainer.wire.receipt import (
    RECEIPT_BYE,
    RECEIPT_FINISHED,
    RECEIPT_NO_BYE,
    ReceiptQuery,
)

__all__ = ["Admissions", "Receipt", "admission_of", "receipt_of"]


#: (admission status, BYE status, reason, steps held, the BYE's count, samples refused
#: as non-finite): what a RECEIPT says (`receipt_of`)
Receipt = tuple[int, int, str, int, int, int]


class Admissions(Protocol):
    """What `admission_of` reads of a receiver's ingest (`IngestState` is one)."""

    @property
    def sims(self) -> Mapping[int, Any]: ...
    @property
    def refused(self) -> list[tuple[int, str]]: ...
    @property
    def wrong_runs(self) -> Mapping[int, str]: ...  # (id -> why: another run's HELLO)
    @property
    def archive(self) -> Any: ...  # (its ``steps``: id -> steps, of the finished)
    @property
    def nonfinite(self) -> Any: ...  # (its ``by_simulation``: id -> samples refused)
    @property
    def draining(self) -> Any: ...  # (its ``steps``: of those marked, in the buffer)


def admission_of(
    ingest: Admissions, simulation_id: int, other_runs: bool = True
) -> tuple[int, str]:
    """(ADMISSION status, reason) of a simulation at `ingest`: accepted if it holds a
    ledger or all the steps of it; refused (the last refusal's reason) if it refused
    its HELLO and holds nothing of it, with `other_runs` also if it refused a HELLO of
    that id as another run's (``wrong_run``: an ADMISSION_QUERY names no run, so the
    asker is taken to be that simulation); else unknown (no HELLO of it processed yet).
    From the follow thread, while the ingesting thread runs: single reads and a copy of
    the refusal list, which that thread only appends to (no lock needed)."""
    if simulation_id in ingest.sims or ingest.archive.steps.get(simulation_id) is not None:
        return protocol.ADMISSION_ACCEPTED, ""
    refused = [why for sid, why in list(ingest.refused) if sid == simulation_id]
    if refused:
        return protocol.ADMISSION_REFUSED, refused[-1]
    other_run = ingest.wrong_runs.get(simulation_id) if other_runs else None
    if other_run is not None:
        return protocol.ADMISSION_REFUSED, other_run
    return protocol.ADMISSION_UNKNOWN, ""


def receipt_of(ingest: Admissions, run_id: str | None, query: ReceiptQuery) -> Receipt:
    """What a RECEIPT says of `query`'s simulation at `ingest` (a receiver serving
    `run_id`): the admission (`admission_of`; refused ``wrong_run`` when the query names
    another run and the receiver holds nothing of the simulation: its HELLO was
    dropped), the BYE status of the asking client rank, the steps held (unfinished: those
    in the buffer, `ingested`), the count its BYE carried and the samples refused as
    non-finite. From the follow thread while the ingester runs: single reads (the ledger
    first, then the archive, which a finished ledger moves to), as `admission_of`."""
    sid = query.simulation_id
    ledger = ingest.sims.get(sid)
    archived = ingest.archive.steps.get(sid) if ledger is None else None
    nonfinite = int(ingest.nonfinite.by_simulation.get(sid, 0))
    other_run = None not in (run_id, query.run_id) and query.run_id != run_id
    if ledger is None and archived is None and other_run:
        why = wrong_run_reason(str(query.run_id), run_id)
        return protocol.ADMISSION_REFUSED, RECEIPT_NO_BYE, why, 0, 0, 0
    if archived is not None:
        return protocol.ADMISSION_ACCEPTED, RECEIPT_FINISHED, "", int(archived), 0, nonfinite
    # (the query names its run: another run's HELLO of this id is not the asker's)
    status, reason = admission_of(ingest, sid, other_runs=False)
    if ledger is None:
        return status, RECEIPT_NO_BYE, reason, 0, 0, 0
    ledger.asked.add(query.client_rank)  # (its close asked: `connection_lines.lost`)
    steps = int(ledger.completed)
    if ledger.finished:
        return status, RECEIPT_FINISHED, "", steps, 0, min(nonfinite, steps)
    steps = ingest.draining.steps(sid, steps)  # (in the buffer: a batch drains, `ingested`)
    count = ledger.byes.get(query.client_rank)
    bye = RECEIPT_NO_BYE if count is None else RECEIPT_BYE
    return status, bye, reason, steps, int(count or 0), min(nonfinite, steps)
