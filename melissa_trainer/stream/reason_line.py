"""How words quote a stop reason's message: its first line, at most `SAID_CHARS` characters.

One rule for every quote of a trainer's stop (a preempted or stopped trainer's words at a
send, a close, a start, a prediction), the C client's too (clients/c/src/json_repr.c
`mt_reason_line`: the same characters, never cutting a UTF-8 one). A module of its own, with
no import: the client imports it at its start (`stream.endpoints`), where the stop record's
module (`stream.stop_record`: numpy, the non-finite guard, logging) must not be loaded.
"""

from __future__ import annotations

__all__ = ["SAID_CHARS", "said_line"]

#: the most characters of a reason's message that words quote (`said_line`)
SAID_CHARS = 200


def said_line(message: str) -> str:
    """The part of a stop reason's `message` that words quote: its first line (up to a
    ``\\r`` or ``\\n``: a notice is one line), at most `SAID_CHARS` characters. The C
    client cuts the same characters (clients/c/src/json_repr.c mt_reason_line); a
    preempted trainer's message was quoted whole here, its first 200 bytes in C."""
    return message.split("\n", 1)[0].split("\r", 1)[0][:SAID_CHARS]
