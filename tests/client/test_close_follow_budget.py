"""A restarted trainer followed during a close's delivery starts the close's budget in
all again (``CLOSE_CAP_FACTOR`` x ``close_timeout``): its receipts' cap counts from the
follow, not from `Client.close`'s start, as the C client's does (clients/c/src/
close_cap.c: close_began is set again for a followed trainer's close) and as
`ClientTuning.close_timeout` and `confirm.confirm_close` document ("a restarted trainer
followed starts it again"): its replay is delivered anew, by a close of its own.

Before: the Python close passed its own start to `confirm_close` whatever followed, so a
trainer restarted late in a long delivery left its receipts a cap mostly spent."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import zmq

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client import confirm as confirm_module
from melissa_trainer.client.following import Following
from melissa_trainer.client.replay import ReplayWindow


class _FollowsInTheClose:
    """A `Following` whose close follows a restarted trainer (its `followed_at` set)
    after the transport's delivery."""

    followed_at: float | None = None

    def close(self, close: Callable[[], None], follow: object) -> None:
        close()
        self.followed_at = time.monotonic()

    def check(self, force: bool = False) -> None:
        return None


@pytest.mark.timeout(60)
def test_the_receipts_budget_counts_from_a_follow_during_the_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MELISSA_TRAINER_ATTEMPT", raising=False)  # (external mode)
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    began: list[float | None] = []

    def confirm_close(client: Any, rendezvous: str, following: Any, follow: Any, at: Any) -> None:
        began.append(at)

    monkeypatch.setattr(confirm_module, "confirm_close", confirm_close)
    try:
        tuning = ClientTuning(close_timeout=30.0)
        client = Client(
            {"u": ((4,), "float32")}, simulation_id=4, endpoints=f"tcp://127.0.0.1:{port}",
            tuning=tuning,
        )  # fmt: skip
        client.send(0, u=np.ones(4, np.float32))
        following = _FollowsInTheClose()
        client._following = following  # type: ignore[assignment]
        client._rendezvous = "rendezvous"  # (where a restarted trainer was read)
        client.close()
    finally:
        pull.close(linger=0)
        context.term()
    assert following.followed_at is not None
    assert began == [following.followed_at]  # (before: the close's start, earlier)


def test_a_switch_says_when_it_followed() -> None:
    """`Following.switch` records its time (`followed_at`), which the close reads."""
    follower = SimpleNamespace(held=lambda entries, within, until: [SimpleNamespace(status=None)])
    follower.adopt = lambda entries: None
    following = Following(follower, ReplayWindow(1024), 1.0, "simulation 4 rank 0", "")  # type: ignore[arg-type]
    old = SimpleNamespace(simulation_id=4, routing=None, steps=[set()], abandon=lambda: None)
    new = SimpleNamespace(steps=[set()])
    assert following.followed_at is None
    before = time.monotonic()
    assert following.switch(old, [{}], lambda entries: new, lambda *a: None) is new  # type: ignore[arg-type]
    assert following.followed_at is not None and following.followed_at >= before
