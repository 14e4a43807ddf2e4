"""The names `melissa_trainer.wire` imports on first use (PEP 562): `LAZY`.

The modules of the follow socket's messages (`held`, `admission`, `receipt`) and of the
serving channel (`predict`, `predict_describe`) are not imported with the package: a
launched simulation's client asks neither, and its start-up should not pay for them. The package's
``__getattr__`` imports a module the first time one of its names is asked for; this table
says which module defines each name (the package's ``if TYPE_CHECKING:`` imports repeat
it for type checkers). Standard library only, and nothing imported here.
"""

from __future__ import annotations

__all__ = ["LAZY"]

#: module -> the public names imported from it on first use (each module's `__all__`;
#: tests/stream/test_wire_lazy.py holds the two equal)
LAZY: dict[str, tuple[str, ...]] = {
    "melissa_trainer.wire.admission": (
        "ADMISSION_ACCEPTED",
        "ADMISSION_QUERY_BYTES",
        "ADMISSION_REFUSED",
        "ADMISSION_STATUSES",
        "ADMISSION_UNKNOWN",
        "MAX_REASON_BYTES",
        "AdmissionReply",
        "decode_admission",
        "decode_admission_query",
        "encode_admission",
        "encode_admission_query",
    ),
    "melissa_trainer.wire.held": (
        "HELD_ABANDONED",
        "HELD_FINISHED",
        "HELD_NONE",
        "HELD_QUERY_BYTES",
        "HELD_STATUSES",
        "HELD_STEPS",
        "HeldReply",
        "checked_prefix",
        "decode_held",
        "decode_held_query",
        "encode_held",
        "encode_held_query",
    ),
    "melissa_trainer.wire.predict": (
        "REFUSAL_CODES",
        "REFUSAL_REASONS",
        "PredictRequest",
        "Prediction",
        "Refusal",
        "decode_answer",
        "decode_predict",
        "decode_reply",
        "encode_predict",
        "encode_prediction",
        "encode_refused",
        "peek_request_id",
    ),
    "melissa_trainer.wire.predict_describe": (
        "FLAG_DESCRIBE",
        "Description",
        "decode_description",
        "described",
        "encode_describe",
        "encode_description",
        "is_describe",
        "pack_descriptions",
        "read_descriptions",
    ),
    "melissa_trainer.wire.receipt": (
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
    ),
}
