"""The wire protocol between simulations and the trainer (version 2).

Language-neutral and pickle-free: fixed-layout little-endian binary headers (Python
`struct`), JSON only for the once-per-simulation HELLO, raw array bytes. The full
specification, precise enough to write a C or Fortran client, is `docs/protocol.md`;
this package is its reference implementation. It imports only the standard library and
numpy, so that simulations can use it without torch.

Message kinds:

* HELLO (one per client rank, before its data): the fields it will send (name, dtype,
  global shape), the simulation's parameters, its rank and rank count, and optionally
  the run id it belongs to (a receiver of another run refuses it; absent: unchecked,
  as older clients send it).
* DATA (one per field, time step and client rank): this rank's contiguous part of the
  field, as a flat element range `[offset, offset + count)` of the C-ordered global
  array. The bytes follow the header in the same ZeroMQ frame (INLINE flag, cheap for
  small messages) or come as a second frame (received without a copy, for large ones).
  The FINITE flag (DATA and BATCH) says that the sender checked every value finite,
  so that the receiver need not read the payload to check it again.
* BYE (one per client rank and receiver, after its data): how many time steps it sent
  to that receiver (version 2; version 1 counted them over all receivers).
* BATCH (one frame): several time steps of one field of one client rank, each an
  8-byte time step followed by the payload; what DATA carries, with the header paid
  once. The client coalesces small messages into batches (a receiver then handles a
  batch of whole single-field samples as arrays, not message by message).
* PREDICT, PREDICTION, REFUSED (the serving channel, on the trainer's serving socket,
  not the stream's: section 16): a request for the current model's prediction on named
  arrays, the answer with the model's version, or a refusal (back-pressure, not serving).
* On a receiver's follow socket (never the stream's): HELD_QUERY, HELD (section 17:
  which of a simulation's steps a resumed receiver's checkpoint holds, `held`),
  ADMISSION_QUERY, ADMISSION (17a: whether it took the simulation, `admission`),
  RECEIPT_QUERY, RECEIPT (17b: that, whether it ingested the BYE, and the samples
  refused as non-finite, `receipt`).
* ABANDON (from the launcher, to every receiver): a simulation will send nothing more
  and must not be waited for (it failed for good); what it sent stays.
* STUDY_END (from rank 0, to every receiver, once): the study has ended and these are
  the simulations that ended with exit 0 (`study_end`).

`decode` validates everything that can be checked from one message (magic, version,
kind, sizes, dtype, shape, range, rank) and raises `ProtocolError` with a short
machine-readable `reason`; the receiver checks the rest against the HELLO.

Modules, each importable alone; every public name is re-exported here, and callers use
this package (``from melissa_trainer import wire``). The names of `held`, `admission`,
`receipt`, `predict` and `predict_describe` are imported on first use (PEP 562,
`_LAZY`, the table of `lazy_names`): a launched simulation's client never asks a follow
socket or a prediction, and its start-up should not pay for their modules.

* `layout`: the bytes: constants, limits, dtypes, header `Struct`s, the `*_AT` offsets
  (the wire layout's one home: no other module of `stream` or `client` packs bytes);
* `messages`: the decoded messages, `FieldSpec`, `ProtocolError`;
* `encoding`: the frames and prebuilt headers a sender writes;
* `decoding`: `decode`, the validation of one message, and `peek_simulation_id`;
* `held`, `admission`, `receipt`: the follow socket's messages (as above);
* `predict`: the serving channel's messages, their encoding and validation;
* `predict_describe`: the array descriptions of PREDICT, PREDICTION and DESCRIPTION
  (their one codec), and DESCRIBE and DESCRIPTION;
* `checks`: `field_specs`, `dtype_code`, `check_run_id`, shared by both sides.
* `lazy_names`: which module defines each name imported on first use.
* `routing`: which receiver gets a time step (`receiver_of`; import it from its module).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from melissa_trainer.wire.checks import check_run_id, dtype_code, field_specs
from melissa_trainer.wire.decoding import decode, peek_simulation_id
from melissa_trainer.wire.encoding import (
    batch_header_of,
    encode_abandon,
    encode_batch_header,
    encode_bye,
    encode_data_header,
    encode_hello,
    split_at_time_step,
    with_finite_flag,
)
from melissa_trainer.wire.layout import (
    ABANDON,
    ADMISSION,
    ADMISSION_FIXED,
    ADMISSION_QUERY,
    AFTER_TIME_STEP_AT,
    ARRAY_FIXED,
    BATCH,
    BYE,
    BYE_FIXED,
    CLIENT_KINDS,
    DATA,
    DATA_FIXED,
    DATA_HEADER_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DIM_BYTES,
    DIMS,
    DTYPE_CODES,
    DTYPES,
    FLAG_FINITE,
    FLAG_INLINE,
    FLAG_REPLACED,
    FLAGS_AT,
    HELD,
    HELD_FIXED,
    HELD_QUERY,
    HELLO,
    HELLO_DTYPES,
    HELLO_FIXED,
    KIND_AT,
    KIND_NAMES,
    MAGIC,
    MAX_CLIENT_RANKS,
    MAX_HELLO_BYTES,
    MAX_NAME_BYTES,
    MAX_NDIM,
    MAX_PREDICT_ARRAYS,
    MAX_RUN_ID_CHARS,
    NAME_LEN_AT,
    NDIM_AT,
    PREDICT,
    PREDICT_FIXED,
    PREDICTION,
    PREDICTION_FIXED,
    PREFIX,
    RECEIPT,
    RECEIPT_FIXED,
    RECEIPT_QUERY,
    RECEIPT_QUERY_FIXED,
    RECORDS_AT,
    REFUSED,
    REFUSED_FIXED,
    RESERVED_NAMES,
    SIMULATION_ID_AT,
    TIME_STEP_AT,
    U64,
    U64_LIMIT,
    VERSION,
)
from melissa_trainer.wire.lazy_names import LAZY as _LAZY
from melissa_trainer.wire.messages import (
    Abandon,
    Batch,
    Bye,
    Data,
    FieldSpec,
    Hello,
    Message,
    ProtocolError,
)

if TYPE_CHECKING:  # pragma: no cover - the lazy modules' names, for type checkers
    from melissa_trainer.wire.admission import (
        ADMISSION_ACCEPTED,
        ADMISSION_QUERY_BYTES,
        ADMISSION_REFUSED,
        ADMISSION_STATUSES,
        ADMISSION_UNKNOWN,
        MAX_REASON_BYTES,
        AdmissionReply,
        decode_admission,
        decode_admission_query,
        encode_admission,
        encode_admission_query,
    )
    from melissa_trainer.wire.held import (
        HELD_ABANDONED,
        HELD_FINISHED,
        HELD_NONE,
        HELD_QUERY_BYTES,
        HELD_STATUSES,
        HELD_STEPS,
        HeldReply,
        checked_prefix,
        decode_held,
        decode_held_query,
        encode_held,
        encode_held_query,
    )
    from melissa_trainer.wire.predict import (
        REFUSAL_CODES,
        REFUSAL_REASONS,
        Prediction,
        PredictRequest,
        Refusal,
        decode_answer,
        decode_predict,
        decode_reply,
        encode_predict,
        encode_prediction,
        encode_refused,
        peek_request_id,
    )
    from melissa_trainer.wire.predict_describe import (
        FLAG_DESCRIBE,
        Description,
        decode_description,
        described,
        encode_describe,
        encode_description,
        is_describe,
        pack_descriptions,
        read_descriptions,
    )
    from melissa_trainer.wire.receipt import (
        MAX_RECEIPT_QUERY_BYTES,
        RECEIPT_BYE,
        RECEIPT_BYE_STATUSES,
        RECEIPT_FINISHED,
        RECEIPT_NO_BYE,
        ReceiptQuery,
        ReceiptReply,
        confirms,
        decode_receipt,
        decode_receipt_query,
        encode_receipt,
        encode_receipt_query,
    )

#: name -> the module (absolute) that defines it
_WHERE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


__all__ = [
    "RECEIPT",
    "RECEIPT_FIXED",
    "RECEIPT_QUERY",
    "RECEIPT_QUERY_FIXED",
    "MAX_RECEIPT_QUERY_BYTES",
    "RECEIPT_BYE",
    "RECEIPT_BYE_STATUSES",
    "RECEIPT_FINISHED",
    "RECEIPT_NO_BYE",
    "ReceiptQuery",
    "ReceiptReply",
    "confirms",
    "decode_receipt",
    "decode_receipt_query",
    "encode_receipt",
    "encode_receipt_query",
    "ADMISSION",
    "ADMISSION_ACCEPTED",
    "ADMISSION_FIXED",
    "ADMISSION_QUERY",
    "ADMISSION_QUERY_BYTES",
    "ADMISSION_REFUSED",
    "ADMISSION_STATUSES",
    "ADMISSION_UNKNOWN",
    "MAX_REASON_BYTES",
    "AdmissionReply",
    "checked_prefix",
    "decode_admission",
    "decode_admission_query",
    "encode_admission",
    "encode_admission_query",
    "HELD",
    "HELD_ABANDONED",
    "HELD_FINISHED",
    "HELD_FIXED",
    "HELD_NONE",
    "HELD_QUERY",
    "HELD_QUERY_BYTES",
    "HELD_STATUSES",
    "HELD_STEPS",
    "HeldReply",
    "decode_held",
    "decode_held_query",
    "encode_held",
    "encode_held_query",
    "ARRAY_FIXED",
    "MAX_PREDICT_ARRAYS",
    "PREDICT",
    "PREDICTION",
    "PREDICTION_FIXED",
    "PREDICT_FIXED",
    "PredictRequest",
    "Prediction",
    "REFUSAL_CODES",
    "REFUSAL_REASONS",
    "REFUSED",
    "REFUSED_FIXED",
    "Refusal",
    "decode_answer",
    "decode_predict",
    "decode_reply",
    "encode_predict",
    "encode_prediction",
    "encode_refused",
    "peek_request_id",
    "FLAG_DESCRIBE",
    "Description",
    "decode_description",
    "described",
    "encode_describe",
    "encode_description",
    "is_describe",
    "pack_descriptions",
    "read_descriptions",
    "ABANDON",
    "AFTER_TIME_STEP_AT",
    "Abandon",
    "BATCH",
    "BYE",
    "BYE_FIXED",
    "CLIENT_KINDS",
    "Batch",
    "Bye",
    "DATA",
    "DATA_FIXED",
    "DATA_HEADER_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DIMS",
    "DIM_BYTES",
    "DTYPES",
    "DTYPE_CODES",
    "Data",
    "FLAGS_AT",
    "FLAG_FINITE",
    "FLAG_INLINE",
    "FLAG_REPLACED",
    "FieldSpec",
    "HELLO",
    "HELLO_DTYPES",
    "HELLO_FIXED",
    "Hello",
    "KIND_AT",
    "KIND_NAMES",
    "MAGIC",
    "MAX_CLIENT_RANKS",
    "MAX_HELLO_BYTES",
    "MAX_NAME_BYTES",
    "MAX_NDIM",
    "MAX_RUN_ID_CHARS",
    "Message",
    "NAME_LEN_AT",
    "NDIM_AT",
    "PREFIX",
    "ProtocolError",
    "RECORDS_AT",
    "RESERVED_NAMES",
    "SIMULATION_ID_AT",
    "TIME_STEP_AT",
    "U64",
    "U64_LIMIT",
    "VERSION",
    "batch_header_of",
    "check_run_id",
    "decode",
    "dtype_code",
    "encode_abandon",
    "encode_batch_header",
    "encode_bye",
    "encode_data_header",
    "encode_hello",
    "field_specs",
    "peek_simulation_id",
    "split_at_time_step",
    "with_finite_flag",
]
