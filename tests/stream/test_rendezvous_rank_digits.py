"""Which names a rendezvous reader takes for rank files, as the C client does
(clients/c/src/rendezvous.c): ASCII digits only, and at most `MAX_RANK_DIGITS` of them
(leading zeros aside). Before, a rank of more digits was skipped unsaid by the C client
and read by Python (its verdicts then differed: tests/c/test_c_rendezvous_reread.py
compares them), and Python read ``rank_١.json`` (an Arabic-Indic one) as rank 1, which
the C client skips. No trainer writes either (`write_rendezvous`: ``rank_{rank}.json``
of a process's rank). Real files in a real directory; the oracle: the names written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from melissa_trainer.stream.endpoints import fetch_rendezvous, write_rendezvous
from melissa_trainer.stream.rank_bounds import MAX_RANK_DIGITS

pytestmark = pytest.mark.timeout(60)


def words(rv: Path) -> str:
    """What a client's start says of `rv`, which it does not take."""
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=0.0, alive_only=True)
    return str(caught.value)


def test_a_rank_of_too_many_digits_is_refused_unread(tmp_path: Path) -> None:
    """Failed before: "files disagree on world_size: [1, 1000000001]"."""
    write_rendezvous(tmp_path, 0, 1, "tcp://127.0.0.1:5001")  # (this process: live)
    rank = 10**MAX_RANK_DIGITS
    big = {"version": 1, "rank": rank, "world_size": rank + 1, "endpoint": "tcp://h:1"}
    (tmp_path / f"rank_{rank}.json").write_text(json.dumps(big))
    (tmp_path / f"rank_00{rank - 1}.json").write_text("{")  # (9 digits: read, unreadable)
    said = words(tmp_path)
    refused = (
        f"rank_{rank}.json invalid (its rank {rank} has over {MAX_RANK_DIGITS} digits: no "
        f"trainer has so many ranks)"
    )
    assert refused in said and "disagree" not in said, said
    assert said.index(f"rank_00{rank - 1}.json unreadable") < said.index(refused), said


def test_a_rank_of_other_digits_than_ascii_is_no_rank_file(tmp_path: Path) -> None:
    """Failed before: "world_size 2, ranks [0] missing" (read as rank 1)."""
    entry = {"version": 1, "rank": 1, "world_size": 2, "endpoint": "tcp://h:1"}
    (tmp_path / "rank_\u0661.json").write_text(json.dumps(entry))
    said = words(tmp_path)
    assert ": no rank_{r}.json file yet (" in said, said
