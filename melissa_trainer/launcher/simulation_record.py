"""One simulation's record (`SimulationRecord`) and the forms a study's records take in
a checkpoint: one JSON object per simulation (launcher state versions 1 and 2), or one
list per attribute (version 3: `columns`, 10^5 simulations saved and loaded in a
fraction of a second). `read_saved` reads a launcher state of any version once (the
earlier ones upgraded by `common.migrations`): a resume migrates it and builds its
records there, and nowhere again (`SavedStudy`). `records_from` reads the records of any
version; `records_of` gives one object per simulation whatever the version, to read a
checkpoint by hand.

The states and their transitions are `study_record.StudyRecord`'s; this module only holds
and converts.
"""

from __future__ import annotations

import gc
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from melissa_trainer.common.migrations import upgrade
from melissa_trainer.launcher.exit_cause import codes_text

__all__ = [
    "STATUSES",
    "SavedStudy",
    "SimulationRecord",
    "columns",
    "read_saved",
    "records_from",
    "records_of",
]

STATUSES = ("pending", "running", "complete", "exited", "finished", "failed", "abandoned")


@dataclass(slots=True)  # 10^5 of them in a large study: no __dict__ each
class SimulationRecord:
    """One simulation id: its parameters and history.

    Attributes:
        status: one of `STATUSES` (see the module docstring); read-only outside
            `StudyRecord`, which indexes the ids by status.
        restarts: restarts after a failure.
        attempts: launches so far (the next launch's ``MELISSA_TRAINER_ATTEMPT``).
        exit_codes: one per ended attempt: the exit code, "timeout" (killed for
            silence), "refused" (its HELLO did not match the study's fields; killed) or
            "incomplete" (exit 0, but its data never all arrived).
        seconds: wall time of its ended attempts.
        started: when the current attempt started (the launcher's monotonic clock; not
            saved).
        exited_at: when its process exited while its data was incomplete (not saved).
        reason: why it failed or was refused, for error messages.
    """

    parameters: dict[str, float]
    status: str = "pending"
    restarts: int = 0
    attempts: int = 0
    exit_codes: list[int | str] = field(default_factory=list)
    seconds: float = 0.0
    started: float | None = None
    exited_at: float | None = None
    reason: str = ""

    def describe(self, sid: int) -> str:
        """One line on this record, simulation `sid`, for error messages: its state, exit
        codes, parameters and the reason it failed or was refused."""
        text = (
            f"simulation {sid}: {self.status}, exit codes {codes_text(self.exit_codes)}, "
            f"parameters {self.parameters}"
        )
        return f"{text} ({self.reason})" if self.reason else text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "parameters": dict(self.parameters),
            "status": self.status,
            "restarts": self.restarts,
            "attempts": self.attempts,
            "exit_codes": list(self.exit_codes),
            "seconds": self.seconds,
        }
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SimulationRecord:
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown simulation status {status!r}")
        return cls(
            parameters={str(k): float(v) for k, v in data["parameters"].items()},
            status=status,
            restarts=int(data["restarts"]),
            attempts=int(data.get("attempts", len(data["exit_codes"]))),
            exit_codes=[c if isinstance(c, str) else int(c) for c in data["exit_codes"]],
            seconds=float(data["seconds"]),
            reason=str(data.get("reason", "")),
        )


def columns(records: Mapping[int, SimulationRecord], names: Sequence[str]) -> dict[str, Any]:
    """The records as one list per attribute, in id order (`STATE_VERSION` 3)."""
    ids = sorted(records)
    rows = [records[sid] for sid in ids]
    return {
        "ids": ids,
        "status": [r.status for r in rows],
        "parameters": {name: [r.parameters[name] for r in rows] for name in names},
        "restarts": [r.restarts for r in rows],
        "attempts": [r.attempts for r in rows],
        "exit_codes": [r.exit_codes for r in rows],
        "seconds": [r.seconds for r in rows],
        "reasons": {str(sid): r.reason for sid, r in zip(ids, rows, strict=True) if r.reason},
    }


def records_from(state: Mapping[str, Any], names: Sequence[str]) -> dict[int, SimulationRecord]:
    """The records of a launcher state of any version (1 and 2: one JSON object per
    simulation; 3: columns), their parameters in the order of `names`.

    Raises:
        ValueError, KeyError, TypeError: malformed records (an id listed twice or
            negative among them), or parameters that are not finite values of exactly
            `names`.
    """
    with _no_collection():
        return _records_from(upgrade("launcher", state), names)


@dataclass
class SavedStudy:
    """A launcher state read once (`read_saved`): migrated to the current version, its
    records built and checked. A resume applies it once (`StudyRecord.load_saved`: the
    records become the study's, changed in place), after `study_change.check_resume`
    has checked it; nothing reads the state again.

    Attributes:
        records: simulation id -> record, as saved (the statuses of the checkpoint).
        next_id: the id of the next draw.
        redraws: how many failed simulations were replaced.
        sampler: the sampler's own state (its owner's to load and check).
        not_replaced: how many failed simulations failed the study and hold their place
            unreplaced (`StudyRecord.not_replaced`; 0 in a state saved before it was).
        not_replaced_ids: which ones, where the state says (the account names them;
            empty in a state saved before it did).
        draw_rows: the rows of ``draws.csv`` written when the state was taken
            (`draw_log.DrawLog.rows`: a resume cuts the file there); None in a state
            saved before it counted them.
        applied: set once a study has taken the records (a second apply is refused).
    """

    records: dict[int, SimulationRecord]
    next_id: int
    redraws: int
    sampler: Mapping[str, Any]
    not_replaced: int = 0
    not_replaced_ids: frozenset[int] = frozenset()
    draw_rows: int | None = None
    applied: bool = False


def read_saved(state: Mapping[str, Any], names: Sequence[str]) -> SavedStudy:
    """A launcher state (`StudyRecord.state_dict`, any version) read: migrated once, its
    records built once, their parameters in the order of `names`.

    Raises:
        ValueError: an unknown version, malformed records, records whose parameters are
            not `names`, or a record whose id is not below ``next_id``.
    """
    try:  # (earlier versions: `common.migrations`)
        state = upgrade("launcher", state)
        with _no_collection():
            records = _records_from(state, names)
        next_id, redraws = int(state["next_id"]), int(state["redraws"])
        sampler = state["sampler"]
        not_replaced = int(state.get("not_replaced", 0))  # (an older state: none saved)
        named = frozenset(int(i) for i in state.get("not_replaced_ids", ()))
        rows = state.get("draw_rows")  # (an older state: None, draw_log's id rule)
        draw_rows = None if rows is None else int(rows)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"invalid launcher state: {exc!r}") from exc
    if records and max(records) >= next_id:
        raise ValueError(f"simulation {max(records)} in the launcher state is >= next_id {next_id}")
    if not 0 <= not_replaced <= len(records):
        raise ValueError(
            f"invalid launcher state: not_replaced={not_replaced} is not between 0 and the "
            f"{len(records)} simulations it records"
        )
    if len(named) > not_replaced or not named <= records.keys():
        raise ValueError(
            f"invalid launcher state: not_replaced_ids={sorted(named)} are not among the "
            f"{not_replaced} failed simulations not replaced that it records"
        )
    if draw_rows is not None and draw_rows < 0:
        raise ValueError(f"invalid launcher state: draw_rows={draw_rows} is negative")
    return SavedStudy(records, next_id, redraws, sampler, not_replaced, named, draw_rows)


def _records_from(state: Mapping[str, Any], names: Sequence[str]) -> dict[int, SimulationRecord]:
    """The records of a launcher state of the current version (`records_from`)."""
    sims = state["simulations"]
    columns = sims["parameters"]
    if set(columns) != set(names):
        raise ValueError(
            f"the launcher state has parameters {sorted(columns)}, not {sorted(names)}"
        )
    ids = [int(i) for i in sims["ids"]]
    n = len(ids)
    lists = [sims[k] for k in ("status", "restarts", "attempts", "exit_codes", "seconds")]
    if any(len(c) != n for c in (*lists, *columns.values())):
        raise ValueError("the launcher state's columns differ in length")
    bad = set(sims["status"]) - set(STATUSES)
    if bad:
        raise ValueError(f"unknown simulation status {sorted(bad)[0]!r}")
    values = [[float(v) for v in columns[name]] for name in names]
    reasons = sims.get("reasons", {})
    records = {
        sid: SimulationRecord(
            parameters=dict(zip(names, p, strict=True)),
            status=status,
            restarts=int(restarts),
            attempts=int(attempts),
            exit_codes=[c if isinstance(c, str) else int(c) for c in codes],
            seconds=float(seconds),
            reason=str(reasons.get(str(sid), "")),
        )
        for sid, status, restarts, attempts, codes, seconds, *p in zip(
            ids, *lists, *values, strict=True
        )
    }
    if len(records) != n:  # columns can repeat an id (JSON object keys cannot)
        repeated = sorted(sid for sid, count in Counter(ids).items() if count > 1)
        raise ValueError(f"simulation {repeated[0]} is listed twice in the launcher state")
    if records and min(records) < 0:
        raise ValueError(f"simulation {min(records)} in the launcher state: a negative id")
    for sid, record in records.items():
        if not all(math.isfinite(v) for v in record.parameters.values()):
            raise ValueError(
                f"simulation {sid} in the launcher state has parameters "
                f"{record.parameters}, not finite values of {sorted(names)}"
            )
    return records


def records_of(state: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """One JSON object per simulation (as `SimulationRecord.to_json`) from a launcher
    state of any version: to read a checkpoint's study by hand or in a test."""
    state = upgrade("launcher", state)
    names = list(state["simulations"]["parameters"])
    with _no_collection():
        records = _records_from(state, names)
    return {sid: record.to_json() for sid, record in records.items()}


@contextmanager
def _no_collection() -> Iterator[None]:
    """No cyclic garbage collection while 10^5 records are built: each collection of the
    young generation would scan them again (docs/measured.md, "Design choices,
    measured"). The
    records hold no cycles; collection resumes (if it was on) on the way out."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
