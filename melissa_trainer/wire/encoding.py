"""Encoding: the frames a sender writes (HELLO, BYE, ABANDON), the DATA and BATCH
headers it prebuilds once per field part, and the edits it makes to them (the time
step spliced in, FLAG_FINITE set). Standard library and numpy.
"""

from __future__ import annotations

import json
from typing import Any

from melissa_trainer.wire.checks import check_run_id
from melissa_trainer.wire.layout import (
    ABANDON,
    AFTER_TIME_STEP_AT,
    BATCH,
    BYE,
    BYE_FIXED,
    CLIENT_KINDS,
    DATA,
    DATA_FIXED,
    DIMS,
    FLAG_FINITE,
    FLAG_INLINE,
    FLAG_REPLACED,
    FLAGS_AT,
    HELLO,
    HELLO_FIXED,
    KIND_AT,
    MAGIC,
    PREFIX,
    SIMULATION_ID_AT,
    TIME_STEP_AT,
    VERSION,
)
from melissa_trainer.wire.messages import FieldSpec
from melissa_trainer.wire.routing import ROUTINGS


def encode_hello(
    simulation_id: int,
    client_rank: int,
    client_count: int,
    fields: list[FieldSpec] | tuple[FieldSpec, ...],
    parameters: dict[str, float] | None = None,
    run_id: str | None = None,
    client: str | None = None,
    routing: str | None = None,
) -> bytes:
    """The HELLO frame; `run_id` (checked by `check_run_id`), `client` (one of
    `CLIENT_KINDS`: which client library sends it) then `routing` (one of
    `routing.ROUTINGS`; None: ``t % W``) go last in the body, each only when given (a
    body without them is byte for byte what older clients send)."""
    content: dict[str, Any] = {
        "fields": [{"name": f.name, "dtype": f.dtype.str, "shape": list(f.shape)} for f in fields],
        "parameters": {str(k): float(v) for k, v in (parameters or {}).items()},
    }
    if run_id is not None:
        content["run_id"] = check_run_id(run_id, "run_id")
    if client is not None:
        if client not in CLIENT_KINDS:
            raise ValueError(f"client must be one of {CLIENT_KINDS}, not {client!r}")
        content["client"] = client
    if routing is not None:
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, not {routing!r}")
        content["routing"] = routing
    body = json.dumps(content).encode()
    return (
        PREFIX.pack(MAGIC, VERSION, HELLO, 0, simulation_id)
        + HELLO_FIXED.pack(client_rank, client_count, len(body))
        + body
    )


def encode_data_header(
    simulation_id: int,
    time_step: int,
    client_rank: int,
    client_count: int,
    name: bytes,
    dtype_code: int,
    shape: tuple[int, ...],
    offset: int,
    count: int,
    inline: bool,
    finite: bool = False,
) -> bytes:
    """The DATA header; `name` is the field name, UTF-8 encoded (<= 255 bytes);
    `finite`: set FLAG_FINITE (only for a payload whose every value was checked finite)."""
    flags = (FLAG_INLINE if inline else 0) | (FLAG_FINITE if finite else 0)
    return (
        PREFIX.pack(MAGIC, VERSION, DATA, flags, simulation_id)
        + DATA_FIXED.pack(
            time_step,
            client_rank,
            client_count,
            dtype_code,
            len(shape),
            len(name),
            0,
            offset,
            count,
        )
        + DIMS[len(shape)].pack(*shape)
        + name
    )


def encode_batch_header(
    simulation_id: int,
    records: int,
    client_rank: int,
    client_count: int,
    name: bytes,
    dtype_code: int,
    shape: tuple[int, ...],
    offset: int,
    count: int,
) -> bytes:
    """The BATCH header (the DATA header with kind 5 and `records` in place of the
    time step); `records` x (u64 time step + payload) follow it."""
    return batch_header_of(
        encode_data_header(
            simulation_id,
            records,
            client_rank,
            client_count,
            name,
            dtype_code,
            shape,
            offset,
            count,
            False,
        )
    )


def batch_header_of(data_header: bytes) -> bytes:
    """The BATCH header of the same field part as a DATA header (its time step field
    becomes the record count; flags cleared: a sender sets FLAG_FINITE on the batch it
    checked, `with_finite_flag`)."""
    return data_header[:KIND_AT] + bytes([BATCH]) + b"\0\0" + data_header[SIMULATION_ID_AT:]


def with_finite_flag(header: bytes) -> bytes:
    """A DATA or BATCH header (or its bytes before the time step) with FLAG_FINITE set."""
    return header[:FLAGS_AT] + bytes([header[FLAGS_AT] | FLAG_FINITE]) + header[FLAGS_AT + 1 :]


def split_at_time_step(data_header: bytes) -> tuple[bytes, bytes]:
    """A DATA header's bytes before and after its time step: a sender prebuilds them
    once and sends ``head + U64.pack(step) + tail`` at each step."""
    return data_header[:TIME_STEP_AT], data_header[AFTER_TIME_STEP_AT:]


def encode_bye(simulation_id: int, client_rank: int, client_count: int, steps_sent: int) -> bytes:
    return PREFIX.pack(MAGIC, VERSION, BYE, 0, simulation_id) + BYE_FIXED.pack(
        client_rank, client_count, steps_sent
    )


def encode_abandon(simulation_id: int, replaced: bool = False) -> bytes:
    return PREFIX.pack(MAGIC, VERSION, ABANDON, FLAG_REPLACED if replaced else 0, simulation_id)
