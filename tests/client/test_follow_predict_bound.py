"""A prediction's follow awaits the restarted trainer's answer of what it holds within
the request's timeout in all (`Following.switch(whole=True)`, `Follower.held(until=)`):
the runs superseded while it waited and the receivers asked in turn share that one
wait. Before, each run asked (`follow.Superseded`) and each receiver got the whole
timeout again: a request with a 1 s timeout waited up to runs x receivers seconds.

A fake follower and a fake clock: the timeouts each ask is given are recorded, no time
is waited."""

from __future__ import annotations

from typing import Any

import pytest

from melissa_trainer.client import follow as follow_module
from melissa_trainer.client import following as following_module
from melissa_trainer.client.follow import Superseded, Unanswered
from melissa_trainer.client.following import Following
from melissa_trainer.client.replay import ReplayWindow

pytestmark = pytest.mark.timeout(30)

B = [{"run_id": "run-b", "endpoint": "tcp://b:1", "follow_endpoint": "tcp://b:2"}]
C = [{"run_id": "run-c", "endpoint": "tcp://c:1", "follow_endpoint": "tcp://c:2"}]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class DeadRuns:
    """B waits 0.75 s, then C is published (Superseded); C never answers."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.waits = clock, []

    def held(self, entries: list[dict[str, Any]], timeout: float, until: Any = None) -> Any:
        wait = timeout if until is None else max(min(timeout, until - self.clock.now), 0.0)
        self.waits.append(wait)
        if entries is B:
            self.clock.now += 0.75
            raise Superseded(C)
        self.clock.now += wait
        raise Unanswered(f"no HELD within {wait} s")


def test_a_predictions_follow_waits_its_timeout_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(following_module, "time", clock)
    follower = DeadRuns(clock)
    following = Following(follower, ReplayWindow(1 << 20), 30.0, "simulation 3", "")  # type: ignore[arg-type]
    with pytest.raises(Unanswered, match="no HELD within 0.25 s"):
        following.switch(object(), B, lambda e: None, lambda *a: None, 1.0, whole=True)  # type: ignore[arg-type]
    assert follower.waits == [1.0, pytest.approx(0.25)]
    assert clock.now == pytest.approx(101.0)  # (the request's 1 s, not 1.75)


def test_the_receivers_asked_in_turn_share_the_deadline(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(follow_module, "time", clock)
    waits: list[float] = []

    def silent(self: Any, context: Any, endpoint: str, entry: Any, rank: int, world: int,
               timeout: float) -> Any:  # fmt: skip
        waits.append(timeout)
        clock.now += timeout
        if rank == 0:
            return object()  # (rank 0 answers as its wait ends)
        raise Unanswered(f"no HELD within {timeout} s")

    monkeypatch.setattr(follow_module.Follower, "_ask", silent)
    follower = follow_module.Follower(str(tmp_path), 3, "run-a", ["tcp://a:1"])
    two = [dict(B[0], rank=0), dict(B[0], rank=1)]
    with pytest.raises(Unanswered, match="no HELD within 0.25 s"):
        follower.held(two, 0.75, until=clock.now + 1.0)
    assert waits == [0.75, pytest.approx(0.25)]
