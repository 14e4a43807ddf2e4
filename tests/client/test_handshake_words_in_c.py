"""The handshake's words (`client.handshake_words`) are the C client's too, word for word
(its module docstring promises it; clients/c/src/handshake.c): every one of them, and the
sentence a key refused without a detail ends with, are in handshake.c's string literals.
Before, only `PLAIN` (tests/client/test_handshake_silent_keyed.py) and
`NOT_RECEIVER_DROPS` (tests/c/test_c_not_a_receiver_drops_words.py, a C build) were
compared: an edit of one side of `NO_KEY`, `MISMATCH`, `NOT_RECEIVER` or
`UNDETAILED_PLAIN` went unseen. Reads the sources: no build (`NOT_RECEIVER` lives in
send.h, shared with close_failed.c's close, which says it too)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from melissa_trainer.client import handshake_words

SRC = Path(__file__).resolve().parents[2] / "clients" / "c" / "src"
#: the files the handshake's words are defined in
SOURCES = (SRC / "handshake.c", SRC / "send.h")


def literals() -> str:
    """handshake.c and send.h with their adjacent string literals joined, as the C
    compiler joins them (across line ends, and a macro's continuation backslashes)."""
    return "".join(re.sub(r'"(?:\s|\\\n)*"', "", path.read_text()) for path in SOURCES)


#: the words (not the names of the key's sources, nor their table `KEYED`: tests/client/
#: test_handshake_words_by_source.py compares it)
WORDS = [n for n in handshake_words.__all__ if n not in {"ARGUMENT", "ENV", "RENDEZVOUS", "KEYED"}]


@pytest.mark.parametrize("name", WORDS)
def test_each_handshake_word_is_the_c_client_s(name: str) -> None:
    words = getattr(handshake_words, name)
    assert words in literals(), f"{name} is in neither handshake.c nor send.h: {words!r}"


def test_a_key_refused_without_detail_ends_alike() -> None:
    """`Handshakes.refused`'s cause for a keyed client's failure without a detail."""
    mismatch = f"{handshake_words.MISMATCH} (the receiver's curve_public_key, that of the"
    ending = f"trainer running now); or {handshake_words.UNDETAILED_PLAIN}"
    assert f"{mismatch} {ending}" in literals()
