"""A client's rendezvous wait says what is wrong with each file in rank order (then
name), as the C client does (clients/c/src/rendezvous.c): before, in the directory's
order (``os.listdir``'s, a hash order on ext4), which the C client's did not match word
for word (tests/c/test_c_rendezvous_missing_gone.py). Failed before: the ranks came in
the directory's order. Real files in a real directory; the oracle: the ranks written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from melissa_trainer.stream.endpoints import fetch_rendezvous, write_rendezvous

pytestmark = pytest.mark.timeout(60)


def test_each_file_s_words_come_in_rank_order(tmp_path: Path) -> None:
    ranks = 12
    for rank in range(ranks):
        path = write_rendezvous(tmp_path, rank, ranks, f"tcp://127.0.0.1:{5000 + rank}")
        if rank % 3 == 0:  # (unreadable: said with the parser's words)
            path.write_text("{")
        else:  # (stopped: said with why)
            path.write_text(json.dumps({**json.loads(path.read_text()), "stopped": True}))
    (tmp_path / "rank_01.json").write_text("{")  # (rank 1 again: after rank_1.json)
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(tmp_path, timeout=0.0)
    said = str(caught.value)
    heads = [
        f"rank_{r}.json: its trainer" if r % 3 else f"rank_{r}.json unreadable"
        for r in range(ranks)
    ]
    heads.insert(1, "rank_01.json unreadable")  # (rank 1, its name before "rank_1.json")
    at = [said.index(head) for head in heads]
    assert at == sorted(at), said
