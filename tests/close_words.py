"""`c_words`: a Python close notice in the C client's words, for the tests that compare
the two clients' notices (tests/client/test_receipt_notice_words.py,
tests/c/test_c_close_receipt_notice.py, tests/c/test_c_send_notice.py; clients/c/src/
close_notice.c and send_notice.c say the C ones)."""

from __future__ import annotations

import re

__all__ = ["c_words"]


def c_words(python: str) -> str:
    """The C client's words for a Python close (or blocked send) notice: the setters
    named as C names them ("ClientTuning.NAME=V s" -> "mt_set_NAME=V s", "ClientTuning(A=...,
    B=...) shortens it" -> "mt_set_A and mt_set_B shorten it"; Client's send_timeout too),
    a bound of None as one < 0."""

    def shorten(found: re.Match[str]) -> str:
        names = [f"mt_set_{item.split('=')[0]}" for item in found[1].split(", ")]
        return " and ".join(names) + (" shorten it" if len(names) > 1 else " shortens it")

    text = re.sub(r"(?:ClientTuning|Client)\(([^)]*)\) shortens it", shorten, python)
    text = re.sub(
        r"\((close|send)_timeout and disconnected_timeout are None\)",
        r"(mt_set_\1_timeout and mt_set_disconnected_timeout are < 0)",
        text,
    )
    text = text.replace("Client.send_timeout=", "mt_set_send_timeout=")
    return text.replace("ClientTuning.", "mt_set_").replace("=None)", " < 0)")
