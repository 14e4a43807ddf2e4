"""`plural`: a count and its noun, in the number the count asks for ("1 simulation",
"2 simulations", "1 loss", "0 losses"), for the words a user reads (the launcher's, the
receiver's, the study's).

`closest_name`: the one "did you mean ...?" of the package's errors (configuration keys,
`ReceiverConfig`'s keywords, a field's dtype name).

A user trial read "1 simulations" in a study's error; every count the launcher prints
before a noun goes through here (tests/launcher/test_words_plural.py pins the singular).
Imports nothing of the package.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["close_names", "closest_name", "plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``f"{count} {noun}"``, the noun singular for a count of 1 (and -1), else plural:
    `many` when given (an irregular plural, or one of several words: "parameter sets"),
    else `noun` + "es" after s, x, z, ch, sh ("loss" -> "losses"), else + "s"."""
    if abs(count) == 1:
        return f"{count} {noun}"
    if many is None:
        many = noun + ("es" if noun.endswith(("s", "x", "z", "ch", "sh")) else "s")
    return f"{count} {many}"


def closest_name(name: str, valid: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The name of `valid` closest to `name` (difflib's, `cutoff` 0.6 unless given;
    `name` lowercased, its dashes read as underscores), or None: the one "did you mean
    ...?" of the package's errors (`config.reading.unknown_key_problems`;
    `config.hf_names.closest_hint`, command-line flags included; `ReceiverConfig`'s
    keywords; `wire.field_specs`'s dtype names)."""
    close = close_names(name, valid, cutoff)
    return close[0] if close else None


def close_names(name: str, valid: Iterable[str], cutoff: float = 0.6) -> list[str]:
    """The names of `valid` close to `name`, closest first (`closest_name`'s rule: a tie
    to the greater name), all of them: a caller that weighs more than the likeness
    (`client.rendezvous_words.missing_note`: a running trainer's directory first)."""
    probe = name.lower().replace("-", "_")
    ordered = sorted(valid)
    return difflib.get_close_matches(probe, ordered, n=max(len(ordered), 1), cutoff=cutoff)
