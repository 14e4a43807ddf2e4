"""The follow channel (docs/protocol.md, section 17) over real sockets: a receiver's
follow socket answers HELD_QUERY from the record it loaded, drops and counts malformed
queries; a client counts and ignores malformed HELD replies; a stopped receiver marks
its rendezvous so that a client started meanwhile waits for the next trainer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from helpers import running

from melissa_trainer import wire as P
from melissa_trainer.client.follow import Follower, FollowError
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.follow_server import FollowServer

pytestmark = pytest.mark.timeout(60)


def test_held_round_trips_and_rejects_what_breaks_its_rules() -> None:
    frame = P.encode_held(3, 9, 1, 2, P.HELD_STEPS, 10, b"\x05\x02")
    reply = P.decode_held(frame)
    assert [t for t in range(25) if reply.holds(t)] == [1, 5, 19]  # local 0, 2, 9
    assert P.decode_held_query(P.encode_held_query(3, 9)) == (3, 9)
    bad = {
        "bad_size": frame + b"\0",
        "truncated": frame[:20],
        "bad_kind": P.encode_held_query(3, 9),
        "bad_rank": P.encode_held(3, 9, 0, 1, P.HELD_NONE)[:16]
        + P.HELD_FIXED.pack(9, 2, 2, P.HELD_NONE, 0, 0, 0),
        "bad_request": frame[:16] + P.HELD_FIXED.pack(9, 1, 2, 9, 0, 0, 0),
        "bad_magic": b"XXXX" + frame[4:],
    }
    for reason, data in bad.items():
        with pytest.raises(P.ProtocolError) as caught:
            P.decode_held(data)
        assert caught.value.reason == reason
    with pytest.raises(P.ProtocolError, match="bad_size: HELD_QUERY of 25 bytes"):
        P.decode_held_query(P.encode_held_query(3, 9) + b"\0")


@pytest.fixture
def server() -> Iterator[FollowServer]:
    made = FollowServer({7: (P.HELD_STEPS, 3, b"\x05")}, 0, 1, "tcp://127.0.0.1:*")
    made.start()
    try:
        yield made
    finally:
        made.stop()


def test_malformed_queries_are_counted_and_dropped_and_the_server_answers_on(
    server: FollowServer,
) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        assert server.endpoint is not None
        sock.connect(server.endpoint)
        sock.send(b"MTRN garbage")  # (too short for a query)
        sock.send_multipart([P.encode_held_query(7, 1), b"extra"])
        sock.send(P.encode_held(7, 1, 0, 1, P.HELD_NONE))  # (a reply's kind)
        sock.send(P.encode_held_query(7, 2))
        assert sock.poll(10_000)
        reply = P.decode_held(sock.recv())
        assert (reply.request_id, reply.status, reply.nbits) == (2, P.HELD_STEPS, 3)
        assert [t for t in range(3) if reply.holds(t)] == [0, 2]
        assert server.rejected == {"truncated": 1, "unexpected_frame": 1, "bad_kind": 1}
        assert not sock.poll(100)  # (no answer to the malformed ones)
    finally:
        sock.close(linger=0)
        ctx.term()


class FakeFollowSocket:
    """A ROUTER that answers each query with `bad` replies, then (if `good`) a valid one."""

    def __init__(self, bad: list[list[bytes]], good: bool) -> None:
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.bind("tcp://127.0.0.1:*")
        self.endpoint = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.bad, self.good = bad, good
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        if not self.router.poll(10_000):
            return
        identity, query = self.router.recv_multipart()
        sid, request = P.decode_held_query(query)
        for frames in self.bad:
            self.router.send_multipart([identity, *frames])
        if self.good:
            self.router.send_multipart([identity, P.encode_held(sid, request, 0, 1, P.HELD_NONE)])

    def close(self) -> None:
        self.thread.join()
        self.router.close(linger=0)
        self.ctx.term()


def entries(endpoint: str) -> list[dict[str, object]]:
    return [
        {"rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1", "follow_endpoint": endpoint}
    ]


def test_malformed_replies_are_counted_and_ignored_by_the_client(tmp_path: Path) -> None:
    bad = [
        [b"junk"],
        [P.encode_held(7, 999_999, 0, 1, P.HELD_NONE)],  # (another query's)
        [P.encode_held(8, 1, 0, 1, P.HELD_NONE)],  # (another simulation's)
        [P.encode_held(7, 1, 0, 1, P.HELD_NONE), b"extra"],
    ]
    fake = FakeFollowSocket(bad, good=True)
    follower = Follower(str(tmp_path), 7, "run-a", [])
    try:
        (reply,) = follower.held(entries(fake.endpoint), timeout=10)
    finally:
        fake.close()
    assert reply.status == P.HELD_NONE
    assert sum(follower.rejected.values()) == 4, follower.rejected
    assert follower.rejected["bad_magic"] == 1 or follower.rejected["truncated"] == 1


def test_no_valid_reply_fails_the_follow_naming_what_was_ignored(tmp_path: Path) -> None:
    fake = FakeFollowSocket([[b"junk"]], good=False)
    follower = Follower(str(tmp_path), 7, "run-a", [])
    try:
        with pytest.raises(FollowError, match="malformed replies ignored"):
            follower.held(entries(fake.endpoint), timeout=0.5)
    finally:
        fake.close()


def test_a_stopped_receiver_marks_its_rendezvous_and_a_client_waits_for_the_next(
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / "rendezvous"
    with running(rendezvous_dir=str(rendezvous), run_id="run-a") as rec:
        (entry,) = fetch_rendezvous(rendezvous, timeout=5)
        assert entry["endpoint"] == rec.endpoint and entry["follow_endpoint"]
    # stopped: no client dials its dead endpoint; it waits (here 0.2 s) and says why
    with pytest.raises(TimeoutError, match="its trainer stopped"):
        fetch_rendezvous(rendezvous, timeout=0.2)
    with running(rendezvous_dir=str(rendezvous), run_id="run-b") as rec:
        (entry,) = fetch_rendezvous(rendezvous, timeout=5)
        assert entry["run_id"] == "run-b" and entry["endpoint"] == rec.endpoint
