"""Rendezvous files (a rank file, a serve file) whose "version", "rank" or "world_size"
the C client and the Python one once read differently, and the words each must say of
them, written out: the oracle of tests/stream/test_rendezvous_parse_parity.py and
tests/c/test_c_rendezvous_parse_parity.py (not computed by the code under test)."""

from __future__ import annotations

import json

from bounded_rendezvous import ENDPOINT

#: more digits than Python's int() converts by default (4300)
LONG = "9" * 4301
#: a rank file's name in the tests -> its text (JSON, one line), and the words of its
#: refusal ("": the text itself)
RANK_FILES = {
    "version true": (
        f'{{"version": true, "rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}"}}',
        "",
    ),
    "version 1.0": (
        f'{{"version": 1.0, "rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}"}}',
        "",
    ),
    "version missing": (f'{{"rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}"}}', ""),
    "world_size missing": (f'{{"version": 1, "rank": 0, "endpoint": "{ENDPOINT}"}}', ""),
    "endpoint empty": ('{"version": 1, "rank": 0, "world_size": 1, "endpoint": ""}', ""),
    "world_size of 4301 digits": (
        f'{{"version": 1, "rank": 0, "world_size": {LONG}, "endpoint": "{ENDPOINT}"}}',
        f"its world_size {LONG} is over 1000000000: no trainer has so many ranks",
    ),
    "world_size of -4301 digits": (
        f'{{"version": 1, "rank": 0, "world_size": -{LONG}, "endpoint": "{ENDPOINT}"}}',
        f"its world_size -{LONG} is not a number of ranks: a whole number 1 to 1000000000",
    ),
    "rank of 4301 digits": (
        f'{{"version": 1, "rank": {LONG}, "world_size": 2, "endpoint": "{ENDPOINT}"}}',
        f"its rank {LONG} is not the rank of its name, 0",
    ),
}


#: rank files that are no JSON object, and the words both clients say of each (each
#: "rank_0.json unreadable (...)": the C client's json_scan.c words, json.loads's reason
#: and its position in characters; Python said "list indices must be integers or slices,
#: not str" of an array, and "Expecting value: line 1 column 1 (char 0)" of no JSON)
UNREADABLE_RANK_FILES = {
    "an array": ("[]", "not a JSON object at character 0"),
    "null": ("null", "not a JSON object at character 0"),
    "a number": ("1", "not a JSON object at character 0"),
    "a string after white space": (' \n\t"x"', "not a JSON object at character 3"),
    "empty": ("", "Expecting value at character 0"),
    "cut short": ('{"version": 1, "rank"', "Expecting ':' delimiter at character 21"),
    "a trailing comma": (
        '{"rank": 0,}',
        "Illegal trailing comma before end of object at character 10",
    ),
    "an unterminated string": ('{"rank": "0}', "Unterminated string starting at character 9"),
    "two lines, a value missing": ('{"version": 1,\n "rank": }', "Expecting value at character 24"),
    "extra data": ("{} {}", "Extra data at character 3"),
    # (\udcff: the byte 0xff, no UTF-8, written as surrogateescape writes it; Python said
    # "unreadable ('utf-8' codec can't decode byte 0xff in position 13: invalid start
    # byte)")
    "a byte no UTF-8 decodes": (
        '{"version": "\udcff"}',
        "a string is not valid UTF-8 at character 15",
    ),
    "such a byte in a nested string": (
        '{"stop_record": {"a": ["\udcff"]}}',
        "a string is not valid UTF-8 at character 26",
    ),
    "such a byte in a key": ('{"\udcff": 1}', "a string is not valid UTF-8 at character 4"),
    "such a byte, then a syntax error": (
        '{"a": "\udcff" 1}',
        "a string is not valid UTF-8 at character 9",
    ),
    "a syntax error, then such a byte": (
        '{"a" 1, "\udcff": 1}',
        "Expecting ':' delimiter at character 5",
    ),
    "such a byte in a string alone": ('"\udcff"', "a string is not valid UTF-8 at character 3"),
}


def serve_text(**members: str) -> str:
    """A serve file of rank 0 of 1, its members replaced by `members` (raw JSON texts;
    a key `rank2` is a second "rank", after the others)."""
    raw = {"version": "1", "rank": "0", "world_size": "1", **members}
    inputs = json.dumps([{"name": "u", "dtype": "<f4", "shape": [4]}])
    rest = f'"endpoint": "{ENDPOINT}", "inputs": {inputs}'
    said = ", ".join(f'"{k.rstrip("2")}": {v}' for k, v in raw.items())
    return f"{{{said}, {rest}}}"


#: read_serving's why when no serve file is read (serving_rendezvous.py NO_SERVER)
NO_SERVER = "no trainer serves predictions there (yet)"


def disagreeing(worlds: int) -> dict[str, str]:
    """Serve files of `worlds` world sizes, 2 to `worlds` + 1 (rank r of r + 2, in a file
    of its own): a name -> its text."""
    return {
        f"serve_{r}.json": serve_text(rank=str(r), world_size=str(r + 2)) for r in range(worlds)
    }


#: serve files that disagree on their world size, and the why of both clients: every size,
#: sorted, up to 5, then counted (C named the first size it read and the last other one)
DISAGREEING = {
    "3 sizes": (disagreeing(3), "serve files disagree on world_size: [2, 3, 4]"),
    "7 sizes": (
        disagreeing(7),
        "serve files disagree on world_size: [2, 3, 4, 5, 6, ... (7 in all)]",
    ),
}
