"""`rank_bounds.load_entry` reads a rank file by plain json.loads (C's int conversion),
and only a file json.loads refuses for an integer past int()'s digit limit again with
a callback per integer (`_whole`, a `HugeInt` past the limit): a Python callback per
integer made every rank file slower to read (a large stop record's: review hrev8). Both
paths must give the same values: below the limit the oracle is plain json.loads; above
it, json.loads with the digit limit lifted (`sys.set_int_max_str_digits(0)`), its
integers over the limit written as `HugeInt` of their digits."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from melissa_trainer.stream import rank_bounds
from melissa_trainer.stream.rank_bounds import HugeInt, load_entry

pytestmark = pytest.mark.timeout(60)

LIMIT = sys.get_int_max_str_digits()
LONG = "9" * (LIMIT + 1)
RECORD = json.dumps(
    {
        "version": 1,
        "run_id": "r1",
        "reason": {"code": "end", "message": "the run ended"},
        "finished": [[10**12 + i, 100 + i % 7, i % 3] for i in range(500)],
        "byes": [[-i, i % 64, 5, 2**63 - 1, 0] for i in range(50)],
        "complete": True,
    }
)
ENTRY = '{{"version": 1, "rank": {rank}, "world_size": {world}, "endpoint": "tcp://h:1"'
#: rank files below the limit: integers of every size up to it, negative, floats
BELOW = [
    ENTRY.format(rank=0, world=1) + "}",
    ENTRY.format(rank=0, world="9" * LIMIT) + "}",
    ENTRY.format(rank=-0, world="-" + "9" * LIMIT) + ', "x": [1.5, -2e3, 1e400]}',
    ENTRY.format(rank=0, world=1) + f', "stopped": true, "stop_record": {RECORD}}}',
]
#: rank files with an integer past the limit, anywhere
ABOVE = [
    ENTRY.format(rank=0, world=LONG) + "}",
    ENTRY.format(rank=LONG, world=2) + "}",
    ENTRY.format(rank=0, world="-" + LONG) + "}",
    ENTRY.format(rank=0, world=1) + f', "follow_endpoint": {LONG}, "stop_record": {RECORD}}}',
    ENTRY.format(rank=0, world=1) + f', "x": [[{LONG}, 1.5, {"1" * LIMIT}]]}}',
]


@contextmanager
def no_digit_limit() -> Iterator[None]:
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(before)


def as_huge(value: Any) -> Any:
    """`value` (read with no digit limit) with each int over `LIMIT` digits a HugeInt."""
    if isinstance(value, dict):
        return {k: as_huge(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_huge(v) for v in value]
    if type(value) is int and len(str(abs(value))) > LIMIT:
        return HugeInt(str(value))
    return value


@pytest.mark.parametrize("text", BELOW, ids=range(len(BELOW)))
def test_below_the_limit_both_paths_read_what_json_loads_reads(text: str) -> None:
    fast, slow = load_entry(text), json.loads(text, parse_int=rank_bounds._whole)
    assert fast == slow == json.loads(text)
    assert repr(fast) == repr(slow)  # (int and float alike: 1 is not 1.0 here)


@pytest.mark.parametrize("text", ABOVE, ids=range(len(ABOVE)))
def test_above_the_limit_both_paths_read_the_integers_as_their_digits(text: str) -> None:
    with no_digit_limit():
        expected = as_huge(json.loads(text))
        said = repr(expected)
    fast, slow = load_entry(text), json.loads(text, parse_int=rank_bounds._whole)
    assert fast == slow == expected
    assert repr(fast) == repr(slow) == said  # (a HugeInt's repr: its digits, sign included)


def test_below_the_limit_no_integer_goes_through_the_callback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path is plain json.loads: the callback is never called below the limit."""

    def refuse(digits: str) -> Any:
        raise AssertionError(f"the slow path read {digits[:20]}")

    monkeypatch.setattr(rank_bounds, "_whole", refuse)
    for text in BELOW:
        assert load_entry(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"rank": 0,}', f'{{"world_size": {LONG}, ]', "[1] 2"])
def test_a_text_that_is_not_json_is_refused_as_json_loads_refuses_it(text: str) -> None:
    """Not JSON: json.loads' own error, the same words (a file "unreadable (...)"); a
    text both past the limit and broken is refused for the break, as before."""
    with pytest.raises(json.JSONDecodeError) as caught:
        load_entry(text)
    with no_digit_limit(), pytest.raises(json.JSONDecodeError) as oracle:
        json.loads(text)
    assert str(caught.value) == str(oracle.value)
