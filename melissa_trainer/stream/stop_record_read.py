"""A stop record read back (`stop_record`'s format): every field checked, sizes bounded,
JSON only (nothing unpickled), strings read as the C client reads them."""

from __future__ import annotations

from typing import Any

from melissa_trainer import wire as protocol
from melissa_trainer.stream.reason_line import as_c_reads
from melissa_trainer.stream.stop_record import (
    MAX_MESSAGE,
    REASON_CODES,
    RECORD_LIMIT,
    RECORD_VERSION,
    ExpectedEnd,
    StopReason,
    StopRecord,
    restarts_fault,
)

__all__ = ["c_string", "parse_record"]

_U64 = 2**64


def parse_record(value: Any) -> StopRecord:
    """A record read from a rendezvous file, every field checked (JSON only: nothing is
    unpickled; lists bounded by `RECORD_LIMIT`). Its run id and its reason's code and
    message are read up to a NUL (`as_c_reads`), as the C client reads them: both
    clients decide on the same characters (a code ``"end\\u0000x"`` was "end" in C,
    a record Python refused).

    Raises:
        ValueError: not a valid record (the message says what is wrong).
    """
    if not isinstance(value, dict) or value.get("version") != RECORD_VERSION:
        raise ValueError("not a stop record of version 1")
    run_id = c_string(value.get("run_id"))
    if run_id is not None:
        protocol.check_run_id(run_id, "run_id")
    said = value.get("reason")
    code = c_string(said.get("code")) if isinstance(said, dict) else None
    if not isinstance(said, dict) or code not in REASON_CODES:
        raise ValueError(f"bad reason {said!r:.200}")
    message = c_string(said.get("message"))
    if not isinstance(message, str) or len(message) > MAX_MESSAGE:
        raise ValueError("bad reason message")
    sid, step = said.get("simulation_id"), said.get("time_step")
    if code == "nonfinite" and not (_count(sid) and _count(step)):
        raise ValueError("a nonfinite reason names no simulation and time step")
    left = 0 if restarts_fault(said) is not None else said.get("restarts_left", 0)
    reason = StopReason(code, message, sid, step, left)
    finished = {}
    for row in _rows(value.get("finished"), 3, "finished"):
        if row[2] > row[1]:
            raise ValueError(f"finished {row}: more refused than held")
        finished[row[0]] = (row[1], row[2])
    byes = {}
    for row in _rows(value.get("byes"), 5, "byes"):
        if row[4] > row[3] or row[1] >= 2**16:
            raise ValueError(f"byes {row}: bad rank or counts")
        byes[(row[0], row[1])] = (row[2], row[3], row[4])
    complete = value.get("complete")
    if not isinstance(complete, bool):
        raise ValueError("bad complete flag")
    ended = value.get("expected_end")
    expected_end = None if ended is None else _parse_expected_end(ended)
    held = value.get("unfinished")  # (absent from an older record: None)
    unfinished = span = None
    if held is not None:
        unfinished, span = _held_rows(held, "unfinished", (3, 5)), {}
        for row in held:  # (checked: rows of 3 are an older trainer's, spanning nothing)
            if len(row) == 5:
                if row[3] > row[4] or (row[1] and row[4] - row[3] < row[1] - 1):
                    raise ValueError(f"unfinished {row}: a bad first and last step")
                span[row[0]] = (row[3], row[4])
    return StopRecord(run_id, reason, finished, byes, complete, expected_end, unfinished, span)


def c_string(value: Any) -> Any:
    """A string of a rendezvous file as the C client reads it, up to a NUL (`as_c_reads`);
    anything else as it is (its checks say what is wrong)."""
    return as_c_reads(value) if isinstance(value, str) else value


def _parse_expected_end(value: Any) -> ExpectedEnd:
    if not isinstance(value, dict):
        raise ValueError("expected_end: not an object")
    counts: list[Any] = [value.get(k) for k in ("expected_simulations", "finished", "abandoned")]
    if not all(map(_count, counts)):
        raise ValueError(f"expected_end: bad counts {counts!r:.100}")
    unfinished = _held_rows(value.get("unfinished"), "expected_end.unfinished")
    return ExpectedEnd(counts[0], counts[1], counts[2], unfinished)


def _held_rows(value: Any, name: str, widths: tuple[int, ...] = (3,)) -> dict[int, tuple[int, int]]:
    """Rows ``[sid, steps held, refused, ...]`` (of one of `widths`) as sid -> (held,
    refused), checked."""
    held = {}
    for row in _rows(value, widths, name):
        if row[2] > row[1]:
            raise ValueError(f"{name} {row}: more refused than held")
        held[row[0]] = (row[1], row[2])
    return held


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _U64


def _rows(value: Any, width: int | tuple[int, ...], name: str) -> list[list[int]]:
    widths = (width,) if isinstance(width, int) else width
    if not isinstance(value, list) or len(value) > RECORD_LIMIT:
        raise ValueError(f"{name}: not a list of at most {RECORD_LIMIT}")
    for row in value:
        if not (isinstance(row, list) and len(row) in widths and all(map(_count, row))):
            raise ValueError(f"{name}: bad row {row!r:.100}")
    return value
