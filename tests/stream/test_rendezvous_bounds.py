"""A rank file out of bounds (`stream.rank_bounds`): a ``world_size`` that is not a whole
number 1 to 10**9, or a rank that is not its name's or not under it, is refused by name,
and the ranks a directory misses are listed up to 10, then counted. Before, a corrupt or
hand-edited ``world_size`` of 10**12 had `fetch_rendezvous` build the list of its missing
ranks (out of memory, or a loop for ever) and a world of 10**9 list them all; a rank
``true`` passed for rank 1. Real files in a real directory; the oracle: the words written
out in tests/bounded_rendezvous.py, and the ranks written. The cases whose regression
would exhaust the memory are read by a process of bounded memory (e2e), the others here."""

from __future__ import annotations

from pathlib import Path

import pytest
from bounded_rendezvous import REFUSED, python_words, write_file

from melissa_trainer.stream.endpoints import fetch_rendezvous

pytestmark = pytest.mark.timeout(120)
HUGE = ("rank_0.json", "0", "1000000000000")


def words(rv: Path) -> str:
    """What a client's start says of `rv` (this process: the cases bounded anyway)."""
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=0.2, alive_only=True)
    return str(caught.value)


@pytest.mark.parametrize("file", [f for f in REFUSED if f != HUGE], ids=lambda f: "-".join(f))
def test_a_file_out_of_bounds_is_refused_by_name(
    tmp_path: Path, file: tuple[str, str, str]
) -> None:
    """Failed before: "invalid ({...})" (the file's dict), and the rank ``true`` was
    taken for rank 1 ("world_size 2, ranks [0] missing")."""
    rv = tmp_path / "rendezvous"
    write_file(rv, *file)
    said = words(rv)
    assert f": {file[0]} invalid ({REFUSED[file]}) (is the trainer running" in said, said


@pytest.mark.parametrize(
    ("world", "rank", "missing"),
    [
        (3, 1, "[0, 2]"),  # (today's words, whole)
        (11, 3, "[0, 1, 2, 4, 5, 6, 7, 8, 9, 10]"),  # (10 missing: all listed)
        (12, 3, "[0, 1, 2, 4, 5, 6, 7, 8, 9, 10, ... (11 in all)]"),
    ],
)
def test_missing_ranks_are_listed_up_to_ten_then_counted(
    tmp_path: Path, world: int, rank: int, missing: str
) -> None:
    """Failed before (12): the 11 missing ranks listed."""
    rv = tmp_path / "rendezvous"
    write_file(rv, f"rank_{rank}.json", str(rank), str(world))
    said = words(rv)
    assert f"0.2 s: world_size {world}, ranks {missing} missing (is the" in said, said


@pytest.mark.e2e  # (a process, of bounded memory: a regression must not exhaust the host's)
def test_a_world_size_of_10_to_the_12_and_a_world_of_10_to_the_9_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """Failed before: a MemoryError in 2 GiB, for each (the list of their missing ranks)."""
    huge = tmp_path / "huge"
    write_file(huge, *HUGE)
    said = python_words(huge, 0.2)
    assert f"0.2 s: rank_0.json invalid ({REFUSED[HUGE]}) (is the" in said, said
    high = tmp_path / "high"  # (within bounds: the last rank of a billion)
    write_file(high, "rank_999999999.json", "999999999", str(10**9))
    said = python_words(high, 0.2)
    missing = "ranks [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (999999999 in all)] missing"
    assert f"0.2 s: world_size 1000000000, {missing} (is the" in said, said
