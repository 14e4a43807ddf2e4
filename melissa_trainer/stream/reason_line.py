"""How words quote a stop reason's message: its first line, at most `SAID_CHARS` characters.

One rule for every quote of a trainer's stop (a preempted or stopped trainer's words at a
send, a close, a start, a prediction), the C client's too (clients/c/src/json_repr.c
`mt_reason_line`: the same characters, never cutting a UTF-8 one). A module of its own, with
no import: the client imports it at its start (`stream.endpoints`), where the stop record's
module (`stream.stop_record`: numpy, the non-finite guard, logging) must not be loaded.
"""

from __future__ import annotations

__all__ = ["CODE_CHARS", "SAID_CHARS", "as_c_reads", "said_code", "said_line"]

#: the most characters of a reason's message that words quote (`said_line`)
SAID_CHARS = 200
#: the most characters of a reason's code that words quote (`said_code`)
CODE_CHARS = 32


def as_c_reads(text: str) -> str:
    """`text` up to its first NUL (a ``\\u0000`` in the JSON): what the C client reads
    of a record's string (a C string ends there), so that both say, and decide on, the
    same characters (a message holding one was cut there in C only)."""
    return text.split("\x00", 1)[0]


def said_line(message: str) -> str:
    """The part of a stop reason's `message` that words quote: its first line (up to a
    ``\\r``, ``\\n`` or NUL: a notice is one line; `as_c_reads`), at most `SAID_CHARS`
    characters. The C client cuts the same characters (clients/c/src/json_repr.c
    mt_reason_line); a preempted trainer's message was quoted whole here, its first 200
    bytes in C."""
    return as_c_reads(message).split("\n", 1)[0].split("\r", 1)[0][:SAID_CHARS]


def said_code(code: str) -> str:
    """The part of a stop reason's `code` that words quote: up to a NUL (`as_c_reads`),
    at most `CODE_CHARS` characters (C: as many UTF-8 characters, never one cut; it cut
    32 bytes where Python quoted the code whole)."""
    return as_c_reads(code)[:CODE_CHARS]
