"""A blocked send told to follow a restarted trainer at once (`Following.seen`) whose
run is gone from the rendezvous when the client reads it again to follow it.

The race: `seen` reads the rendezvous (run B complete: the send gives up on the
receiver gone, its error saying "followed at once"), and `after_gone` reads it again to
follow. A trainer that stopped as it started (its files marked stopped in between), or a
rendezvous being rewritten by another, is not found by that second read: the client then
waits `follow_timeout` for a restarted trainer, and its error said both "a restarted
trainer published ... (run B): followed at once" and "Then it waited N s for a restarted
trainer to publish ..., and none did" (seen rarely; the last session's note). Now the
words of `seen` say what is to come, and the error says that run B was gone when the
client came to follow it, and that it waited for another.

The order is forced: the send's attempt calls `seen` as the blocked send does, then
marks B's file stopped (the event in between), then gives up; `follow_timeout` 0 (one
read, no sleep). The first test failed before ("followed at once" and "none did")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, SupportsIndex

import pytest

from melissa_trainer.client.following import Following
from melissa_trainer.client.send_errors import ReceiverGone
from melissa_trainer.stream.endpoints import mark_stopped

pytestmark = pytest.mark.timeout(60)

A, B = "tcp://127.0.0.1:1000", "tcp://127.0.0.1:2000"


def publish(directory: Path, endpoint: str, run_id: str) -> None:
    """Rank 0's file of a one-rank trainer, written as a trainer writes it (renamed)."""
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": endpoint, "run_id": run_id}
    temporary = directory / ".rank_0.tmp"
    temporary.write_text(json.dumps(entry))
    temporary.replace(directory / "rank_0.json")


@pytest.fixture
def following(tmp_path: Path) -> Following:
    """A client's following of trainer A (run-a), with `follow_timeout` 0; trainer B
    (run-b) has published since."""
    publish(tmp_path, A, "run-a")
    made = Following.made_for(str(tmp_path), 1024, 0.0, 3, 0, "run-a", [A])
    assert made is not None
    publish(tmp_path, B, "run-b")
    return made


def blocked_send(following: Following, then: Any) -> Any:
    """An attempt of a send that blocks on A gone: it reads `seen` (as
    `send_wait.SendWait` does while a receiver is down), `then()` happens, and it gives
    up (`ReceiverGone`) with what `seen` said."""

    def send_once(time_step: SupportsIndex, arrays: Any, kwargs: dict[str, Any]) -> Any:
        said = following.seen()
        assert said is not None and "run-b" in said, said
        then()
        raise ReceiverGone(f"simulation 3 rank 0: sending time step {int(time_step)}: {said}")

    return send_once


def no_follow(entries: list[dict[str, Any]]) -> None:
    pytest.fail(f"followed {entries}: no run is there to follow")


def test_a_run_seen_then_stopped_is_said_gone_not_followed(
    following: Following, tmp_path: Path
) -> None:
    send_once = blocked_send(following, lambda: mark_stopped(str(tmp_path), 0, B))
    with pytest.raises(ReceiverGone) as error:
        following.send(send_once, no_follow, 7, {}, {})
    said = str(error.value)
    # (before: "...(run run-b): followed at once. Then it waited 0 s for a restarted
    # trainer to publish in DIR (...), and none did: 0 s in all. ...")
    assert "(run run-b): followed at once" not in said, said  # (it was not)
    assert f"(run run-b), to be followed at once. But run run-b was gone from {tmp_path}" in said
    assert "not followed. Then it waited 0 s for another restarted trainer to publish" in said


def test_a_run_seen_and_still_there_is_followed_and_not_said_after(
    following: Following, tmp_path: Path
) -> None:
    """The other order (B still there: followed), and the run announced is not carried
    over to a later wait that announced none."""
    followed: list[list[dict[str, Any]]] = []
    tries = iter([blocked_send(following, lambda: None), lambda *_: {}])
    following.send(lambda *a: next(tries)(*a), followed.append, 7, {}, {})
    assert [[e["run_id"] for e in entries] for entries in followed] == [["run-b"]]
    mark_stopped(str(tmp_path), 0, B)  # (B stops: a later wait finds no trainer)
    gone = ReceiverGone("simulation 3 rank 0: sending time step 8: B disconnected.")
    with pytest.raises(ReceiverGone) as error:
        following.after_gone(gone, started=0.0)
    said = str(error.value)
    assert "was gone" not in said and "for a restarted trainer to publish" in said, said
