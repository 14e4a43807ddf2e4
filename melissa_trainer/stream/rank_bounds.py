"""The bounds of a rendezvous rank file (`endpoints.fetch_rendezvous`), and the words of the
ranks a directory misses: a reader never enumerates, nor holds anything per rank of, a
file's ``world_size``. A corrupt or hand-edited file of ``world_size`` 10**12 had the
reader list its 10**12 missing ranks (out of memory, or a loop for ever), as the C client
did (clients/c/src/rendezvous_ranks.c, word for word)."""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from melissa_trainer.common.json_words import json_words, not_object_words, not_utf8

#: a rank file's name of more digits (leading zeros aside) is refused unread: no trainer
#: has a billion ranks (the C client's MT_RANK_DIGITS; ASCII digits, as it reads them)
MAX_RANK_DIGITS = 9
#: the largest ``world_size`` a rank file may name (its ranks then have 9 digits at most)
MAX_WORLD = 10**MAX_RANK_DIGITS
#: the missing ranks listed at most, the others counted (C's MT_MISSING_SHOWN)
MISSING_SHOWN = 10


class HugeInt:
    """A JSON integer of more digits than Python's int() converts
    (sys.get_int_max_str_digits: 4300 by default), kept as its text (`digits`, a sign
    included): read by `load_entry`, over any bound here and quoted as its digits, as
    the C client reads and quotes it. json.loads raised ValueError on it: the file was
    "unreadable" in Python, "over 1000000000" in C.

    Neither a ``str`` nor an ``int``: every ``isinstance(value, str)`` or ``type(value)
    is int`` check of a reader refuses it, as C refuses an integer where it wants a
    string (an ``endpoint`` of 4301 digits is "invalid" in both)."""

    __slots__ = ("digits",)

    def __init__(self, digits: str) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return self.digits  # (quoted as the file holds it: C's json_repr.c)

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HugeInt) and other.digits == self.digits

    def __hash__(self) -> int:
        return hash(self.digits)

    @property
    def negative(self) -> bool:
        """Whether it is under zero."""
        return self.digits.startswith("-")


def type_name(value: Any) -> str:
    """The name of the type of a file's `value` as the C client says it (json_repr.c):
    "int" of a `HugeInt` too, the int it is."""
    return "int" if isinstance(value, HugeInt) else type(value).__name__


def _whole(digits: str) -> int | HugeInt:
    try:
        return int(digits)
    except ValueError:  # (past int()'s digit limit)
        return HugeInt(digits)


def load_entry(text: str) -> Any:
    """A rendezvous file's JSON `text` read as json.loads reads it, but an integer of any
    number of digits read (a `HugeInt` past int()'s limit): its bounds said by name.
    Raises json.JSONDecodeError (a ValueError) on a text that is not JSON, as json.loads.

    Read by plain json.loads first (its C int conversion: a Python callback per integer
    made a large stop record's file much slower to read); only a text json.loads refuses
    for an integer past the limit is read again with `_whole` per integer: the same
    values either way, an int being int() of its digits."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise  # (not JSON: the slow path would raise the same)
    except ValueError:  # (an integer past int()'s digit limit, the only other ValueError)
        return json.loads(text, parse_int=_whole)


def read_object(text: str) -> dict[str, Any]:
    """A rendezvous file's `text` read by `load_entry` as a JSON object, or ValueError
    with the C client's words for why not (rendezvous.c "rank_0.json unreadable (...)"):
    "Expecting value at character 0" (json_scan.c: json.loads's reason, `json_words`),
    "not a JSON object at character 0" (an array, a string, a number, true or null), "a
    string is not valid UTF-8 at character 9" (`text` read with surrogateescape: where
    its first string of such bytes ends, json_scan.c's words; `common.json_words.not_utf8`)."""
    bad = not_utf8(text)  # (bytes no UTF-8 decodes, read as surrogateescape reads them)
    try:
        entry = load_entry(text)
    except json.JSONDecodeError as exc:
        if bad is None or bad > exc.pos:  # (C reads that string first)
            raise ValueError(json_words(text, exc)) from None
    if bad is not None:
        raise ValueError(f"a string is not valid UTF-8 at character {bad}")
    if not isinstance(entry, dict):
        raise ValueError(not_object_words(text))
    return entry


def file_text(path: str | os.PathLike[str]) -> str:
    """The text of the rendezvous file at `path`, its bytes no UTF-8 decodes kept, each a
    surrogate (surrogateescape): `read_object` says where, as C says it. OSError if it
    cannot be read."""
    return Path(path).read_bytes().decode("utf-8", "surrogateescape")


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The rendezvous file (rank or serve file) at `path` as `read_object` reads it, its
    bytes no UTF-8 decodes kept as surrogateescape reads them (said where, as C says
    it): every reader of these files, so that Python's readers and the C client's take
    and refuse the same bytes alike.

    Raises:
        OSError: it cannot be read (missing, being replaced).
        ValueError: it is not a JSON object, in the C client's words (`read_object`).
    """
    return read_object(file_text(path))


def is_whole(value: Any, expected: int) -> bool:
    """Whether a file's `value` is the integer `expected`: an int, not JSON's true (a bool
    is an int in Python) nor a float (1.0 == 1), as the C client compares it (an integer
    without fraction or exponent)."""
    return type(value) is int and value == expected


def digits_fault(file_rank: int) -> str | None:
    """Why the rank of a file's name, `file_rank`, is refused unread (over
    `MAX_RANK_DIGITS` digits), or None."""
    if len(str(file_rank)) <= MAX_RANK_DIGITS:
        return None
    return f"its rank {file_rank} has over {MAX_RANK_DIGITS} digits: no trainer has so many ranks"


def bounds_fault(rank: Any, world: Any, file_rank: int) -> str | None:
    """Why the ``rank`` and ``world_size`` a file named of rank `file_rank` holds are out
    of bounds, or None: `world` a whole number 1 to `MAX_WORLD` (not a bool: JSON's
    true), `rank` the rank of the name, under `world`. Values quoted as Python's repr (a
    string quoted, an integer's digits), as the C client's json_repr.c quotes them."""
    huge = isinstance(world, HugeInt) and not world.negative
    if (type(world) is int and world > MAX_WORLD) or huge:
        return f"its world_size {world} is over {MAX_WORLD}: no trainer has so many ranks"
    if type(world) is not int or world < 1:
        return f"its world_size {world!r} is not a number of ranks: a whole number 1 to {MAX_WORLD}"
    if type(rank) is not int or rank != file_rank:
        return f"its rank {rank!r} is not the rank of its name, {file_rank}"
    if rank >= world:
        return f"its rank {rank} is not under its world_size {world}"
    return None


def missing_words(world: int, present: Collection[int]) -> str | None:
    """What a directory of `world` ranks misses, `present` the ranks it holds (each
    file's, any number), or None when none is missing: "world_size 3, ranks [0, 2]
    missing", the first `MISSING_SHOWN` ranks and their count past that ("world_size
    1000000, ranks [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... (999999 in all)] missing"; rank 0
    there). Steps over
    `MISSING_SHOWN` + len(`present`) ranks at most, whatever `world`."""
    count = world - sum(1 for r in set(present) if 0 <= r < world)
    if count <= 0:
        return None
    shown: list[str] = []
    rank = 0
    while len(shown) < min(count, MISSING_SHOWN):
        if rank not in present:
            shown.append(str(rank))
        rank += 1
    more = f", ... ({count} in all)" if count > MISSING_SHOWN else ""
    return f"world_size {world}, ranks [{', '.join(shown)}{more}] missing"
