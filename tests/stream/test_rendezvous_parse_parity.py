"""A rank file and a serve file read by Python as the C client reads them
(clients/c/src/rendezvous.c, rendezvous_ranks.c, serve_read.c): a "version", "rank" or
"world_size" must be a whole number (not JSON's true, a bool being an int in Python, nor
1.0, equal to 1), an integer of any number of digits is read and its bounds said, and a
file refused as "invalid" is quoted as its text (what a user finds in the file), not as
the dict json.loads made of it. Real files in a real directory; the oracle: the words
and the files' texts written out here (tests/c/test_c_rendezvous_parse_parity.py
compares them with the C client's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bounded_rendezvous import ENDPOINT
from rendezvous_parse_files import (
    DISAGREEING,
    LONG,
    NO_SERVER,
    RANK_FILES,
    UNREADABLE_RANK_FILES,
    serve_text,
)

from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.serving_rendezvous import read_serving

pytestmark = pytest.mark.timeout(60)


def rank_words(rv: Path) -> str:
    """What a client's start says of `rv` (0.2 s of rendezvous timeout)."""
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=0.2, alive_only=True)
    return str(caught.value)


@pytest.mark.parametrize("name", list(RANK_FILES))
def test_a_rank_file_is_refused_in_the_words_of_the_c_client(tmp_path: Path, name: str) -> None:
    """Failed before: a version true or 1.0 was taken (no error: the start went on); an
    endpoint "" was quoted as the dict ("{'version': 1, ...}"); the integers of 4301
    digits made the file "unreadable (Exceeds the limit (4300 digits) ...)"."""
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    text, words = RANK_FILES[name]
    (rv / "rank_0.json").write_text(text)
    said = rank_words(rv)
    assert f"0.2 s: rank_0.json invalid ({words or text}) (is the" in said, said


@pytest.mark.parametrize("name", list(UNREADABLE_RANK_FILES))
def test_a_rank_file_of_no_json_object_is_said_in_the_words_of_the_c_client(
    tmp_path: Path, name: str
) -> None:
    """Failed before: an array, null, a number or a string was "unreadable (list indices
    must be integers or slices, not str)" (or "'NoneType' object is not subscriptable"),
    a JSON syntax error "unreadable (Expecting value: line 1 column 1 (char 0))"."""
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    text, words = UNREADABLE_RANK_FILES[name]
    (rv / "rank_0.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    said = rank_words(rv)
    assert f"0.2 s: rank_0.json unreadable ({words}) (is the" in said, said


def test_a_valid_rank_file_is_taken(tmp_path: Path) -> None:
    """(the control: the same text with a version 1 and an endpoint)"""
    rv = tmp_path / "rendezvous"
    rv.mkdir()
    text = f'{{"version": 1, "rank": 0, "world_size": 1, "endpoint": "{ENDPOINT}"}}'
    (rv / "rank_0.json").write_text(text)
    (entry,) = fetch_rendezvous(rv, timeout=0.2)
    assert entry["endpoint"] == ENDPOINT


#: serve files (rank 0) none reads: each refused, as the C client refuses it
REFUSED_SERVE = {
    "version true": serve_text(version="true"),
    "version 1.0": serve_text(version="1.0"),
    "rank 0.0": serve_text(rank="0.0"),
    "rank -0.0": serve_text(rank="-0.0"),
    "rank false": serve_text(rank="false"),
    "rank repeated, a string last": serve_text(rank2='"0"'),
    "world_size true": serve_text(world_size="true"),
    "world_size 2.5": serve_text(world_size="2.5"),
    "world_size over 10**9": serve_text(world_size="2000000000"),
    "world_size 10**20": serve_text(world_size="100000000000000000000"),
    "world_size 1e300": serve_text(world_size="1e300"),
}


@pytest.mark.parametrize("name", list(REFUSED_SERVE))
def test_a_serve_file_out_of_its_types_is_not_read(tmp_path: Path, name: str) -> None:
    """Failed before: true, 1.0, 0.0 and -0.0 were taken as 1 and 0 (their entry
    returned), a world_size over 10**9 too ("rank 7 of 2000000000 does not serve")."""
    (tmp_path / "serve_0.json").write_text(REFUSED_SERVE[name])
    assert read_serving(tmp_path, 7, None) == (None, NO_SERVER)


def test_a_serve_file_of_whole_numbers_is_read(tmp_path: Path) -> None:
    """(the control: "-0" is JSON's 0, as C reads it; a world of 10**9 is within bounds)"""
    (tmp_path / "serve_0.json").write_text(serve_text(rank="-0", world_size="1000000000"))
    entry, why = read_serving(tmp_path, 10**9, None)
    assert why == "" and entry is not None and entry["endpoint"] == ENDPOINT


def test_a_serve_file_with_an_integer_of_4301_digits_is_read(tmp_path: Path) -> None:
    """Failed before: json.loads refused the whole file ("Exceeds the limit (4300
    digits)"): skipped, "no trainer serves predictions there (yet)", where the C client
    read it (a member it does not know, of any value)."""
    (tmp_path / "serve_0.json").write_text(serve_text(world_size="2", extra=LONG))
    assert read_serving(tmp_path, 7, None) == (None, "rank 1 of 2 does not serve (yet)")


@pytest.mark.parametrize(
    "members",
    [{"world_size": LONG}, {"rank": LONG}, {"version": LONG}, {"run_id": LONG}],
    ids=lambda m: f"{next(iter(m))} of 4301 digits",
)
def test_a_serve_file_with_a_4301_digit_value_of_its_own_is_not_read(
    tmp_path: Path, members: dict[str, str]
) -> None:
    """(the control: read, each such value is refused, as C refuses it)"""
    (tmp_path / "serve_0.json").write_text(serve_text(**members))
    assert read_serving(tmp_path, 7, "run-a") == (None, NO_SERVER)


def test_a_serve_file_of_no_json_object_is_not_read(tmp_path: Path) -> None:
    """(the control: an array is no serve file, as for C)"""
    (tmp_path / "serve_0.json").write_text("[]")
    assert read_serving(tmp_path, 7, None) == (None, NO_SERVER)


@pytest.mark.parametrize("name", list(DISAGREEING))
def test_serve_files_of_many_world_sizes_are_listed_up_to_five(tmp_path: Path, name: str) -> None:
    """Failed before: every size listed, where the C client named two (and its why of 512
    bytes holds a bounded list)."""
    files, why = DISAGREEING[name]
    for file, text in files.items():
        (tmp_path / file).write_text(text)
    assert read_serving(tmp_path, 7, None) == (None, why)
