"""A client waiting on a rendezvous of which one rank's file refuses the connection (a
trainer killed on another machine) dials each other rank's endpoint once per version of
its file (`trainer_listens.refused_files`' `heard`, kept by `fetch_rendezvous` across
its looks), not at every look (every 0.25 s, up to 1 s each). Failed before (hstop):
the live rank was dialled at each look (a dozen times in 4 s).

Real sockets: rank 0 a PULL socket of this process counting the connections it accepts
(`killed_trainer.LiveRank`), rank 1 a killed stand-in's file; both published as another
pid namespace's (their pids not checkable here: dialled). The oracle: the count."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from killed_trainer import publish_elsewhere, rewrite_rank_0, with_one_rank_refused

from melissa_trainer.stream.endpoints import fetch_rendezvous

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # (a stand-in process)


def test_a_live_rank_is_dialled_once_per_version_of_its_file(tmp_path: Path) -> None:
    rv = tmp_path / "rendezvous"
    live = with_one_rank_refused(rv, tmp_path / "killed")
    notices: list[str] = []

    def rewrite(problem: str) -> None:  # (3 s in: a new version of rank 0's file)
        notices.append(problem)
        assert live.accepted() == 1, notices
        rewrite_rank_0(rv)

    try:
        with pytest.raises(TimeoutError) as caught:
            fetch_rendezvous(rv, timeout=6.0, notice=rewrite, alive_only=True)
        assert notices, "the wait said nothing 3 s in"
        assert live.accepted() == 2, caught.value  # (before: one per look)
    finally:
        live.close()
    assert "rank_1.json: nothing accepts connections at " in str(caught.value)
    assert "rank_0.json" not in str(caught.value), caught.value


def test_a_rank_heard_then_killed_is_dialled_again_before_the_files_are_taken(
    tmp_path: Path,
) -> None:
    """Rank 0 heard (not refused) while rank 1 refused, then killed, its file unchanged;
    rank 1 then live: rank 0 is dialled again before the files are taken, and refused.
    Failed before: its dead endpoint was taken (`heard`), unchecked."""
    rv = tmp_path / "rendezvous"
    live = with_one_rank_refused(rv, tmp_path / "killed")
    closed = False
    context = zmq.Context()
    rank_1 = context.socket(zmq.PULL)
    rank_1.linger = 0

    def kill_rank_0(problem: str) -> None:  # (3 s in: rank 0 heard, rank 1 refused)
        nonlocal closed
        assert live.accepted() == 1 and "rank_1.json" in problem, problem
        live.close()  # (its port refuses now; its file unchanged)
        closed = True
        rank_1.bind("tcp://127.0.0.1:*")
        publish_elsewhere(rv, 1, rank_1.getsockopt_string(zmq.LAST_ENDPOINT), tmp_path / "r1")

    try:
        with pytest.raises(TimeoutError) as caught:  # (before: rank 0's dead endpoint taken)
            fetch_rendezvous(rv, timeout=6.0, notice=kill_rank_0, alive_only=True)
    finally:
        if not closed:
            live.close()
        rank_1.close(linger=0)
        context.term()
    assert closed, "the wait said nothing 3 s in"
    said = str(caught.value)
    assert f"rank_0.json: nothing accepts connections at {live.endpoint} " in said, said
    assert "rank_1.json" not in said, said
