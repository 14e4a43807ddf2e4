"""The words of JSON a reader refuses, as the C client's json_scan.c says them: a
``MELISSA_TRAINER_PARAMETERS`` (`melissa_trainer.client.parameters`) and a rendezvous
rank file (`melissa_trainer.stream.rank_bounds.read_object`) alike, whichever Python
runs: "<json.loads's reason> at character <position>", "not a JSON object at character
<position>". Standard library only; imports nothing of the package.
"""

from __future__ import annotations

import json

__all__ = ["JSON_WS", "json_fault", "json_words", "not_object_words", "not_utf8"]

#: JSON's white space (json.decoder's WHITESPACE, RFC 8259)
JSON_WS = " \t\n\r"
#: the closing bracket after a trailing comma -> the reason Python 3.10-3.12 gave there
_BEFORE_3_13 = {
    "}": "Expecting property name enclosed in double quotes",
    "]": "Expecting value",
}


def json_fault(text: str, exc: json.JSONDecodeError) -> tuple[str, int]:
    """The reason (a trailing " at" dropped: "Unterminated string starting") and the
    position of `exc`, json.loads's failure on `text`, in Python 3.13's words on every
    Python: a comma before a closing bracket is "Illegal trailing comma before end of
    object" (or "of array") at the comma, where 3.10-3.12 said "Expecting property
    name enclosed in double quotes" (or "Expecting value") at the bracket. The C client
    says the same (json_scan.c), whichever Python runs the trainer."""
    why, at = exc.msg.removesuffix(" at"), exc.pos
    closing = text[at : at + 1]
    if _BEFORE_3_13.get(closing) == why:
        before = text[:at].rstrip(JSON_WS)
        if before.endswith(","):
            kind = "object" if closing == "}" else "array"
            return f"Illegal trailing comma before end of {kind}", len(before) - 1
    return why, at


def json_words(text: str, exc: json.JSONDecodeError) -> str:
    """`json_fault`'s reason and position of `exc` (json.loads's failure on `text`) in
    the C client's words: "Expecting value at character 0"."""
    why, at = json_fault(text, exc)
    return f"{why} at character {at}"


def not_object_words(text: str) -> str:
    """Why a JSON `text` that json.loads read is not a JSON object (an array, a string, a
    number, true or null, read where an object is wanted), in the C client's words
    (json.c mt_json_object: "not a JSON object at character 2", where its first
    character after white space is). Indexed by a key, such a value raised a TypeError
    whose words ("list indices must be integers or slices, not str") told a user nothing
    of the file."""
    return f"not a JSON object at character {len(text) - len(text.lstrip(JSON_WS))}"


def not_utf8(text: str) -> int | None:
    """Where the first JSON string of `text` that holds bytes no UTF-8 decodes ends (the
    position after its closing quote, where the C client's reader says it), or None.
    Python reads such bytes of the environment as lone surrogates U+DC80-U+DCFF
    (surrogateescape): json.loads took them into a name (or a string value) that no
    UTF-8 holds, where the C client refuses the variable (json_scan.c "a string is not
    valid UTF-8"); both refuse it now. An unterminated string is json.loads' fault."""
    in_string, i, bad = False, 0, False
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if in_string and bad:
                return i + 1
            in_string = not in_string
        elif in_string and ch == "\\":
            i += 2
            continue
        elif in_string and "\udc80" <= ch <= "\udcff":
            bad = True
        i += 1
    return None
