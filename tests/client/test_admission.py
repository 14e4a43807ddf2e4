"""A simulation the trainer refuses fails (docs/protocol.md, section 17a): a solver
whose HELLO a receiver refused (another grid than the study's) ends with a non-zero
exit and the receiver's reason, not 0 as if it had been trained on; the right grid
still exits 0; the ADMISSION messages are validated on both sides, a malformed one
counted and ignored."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import zmq
from helpers import running

from melissa_trainer import wire as P
from melissa_trainer.client import Client
from melissa_trainer.client.admission import SimulationRefused, confirm_admitted
from melissa_trainer.stream.follow_server import FollowServer

pytestmark = pytest.mark.timeout(120)

SOLVER = """
import sys
import numpy as np
from melissa_trainer.client import Client

sid, n = int(sys.argv[1]), int(sys.argv[2])
with Client(simulation_id=sid, fields={"u": ((n, n), np.float32)}) as client:
    for t in range(3):
        client.send(t, u=np.full((n, n), t, np.float32))
"""


def solver(rendezvous: Path, sid: int, n: int) -> subprocess.CompletedProcess[str]:
    """A solver started by hand: its endpoints from the rendezvous, as a user's."""
    env = {**os.environ, "MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)}
    env.pop("MELISSA_TRAINER_ENDPOINTS", None)
    return subprocess.run(
        [sys.executable, "-c", SOLVER, str(sid), str(n)],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.mark.e2e
def test_a_solver_at_another_grid_size_exits_non_zero_with_the_reason(tmp_path: Path) -> None:
    with running(
        rendezvous_dir=tmp_path, fields={"u": ((32, 32), np.float32)}, run_id="run-a"
    ) as receiver:
        wrong = solver(tmp_path, 3, 16)
        right = solver(tmp_path, 4, 32)
        deadline = time.monotonic() + 60
        while 4 not in receiver.completed() and time.monotonic() < deadline:
            time.sleep(0.02)  # (the BYE is processed after the client's exit)
        assert receiver.completed() == [4]
        assert [sid for sid, _ in receiver.refused()] == [3]  # (the receiver's own record)
    assert wrong.returncode != 0, wrong.stderr
    assert "SimulationRefused: simulation 3: the trainer's receiver 0" in wrong.stderr
    assert "field 'u' is float32 (16, 16) where the study's is float32 (32, 32)" in wrong.stderr
    assert "Run it again declaring the study's fields" in wrong.stderr
    assert right.returncode == 0, right.stderr
    assert "did not confirm" not in right.stderr


def test_close_raises_for_a_refused_simulation_and_not_for_an_accepted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    with running(rendezvous_dir=tmp_path, fields={"u": ((4,), np.float64)}, run_id="run-a"):
        wrong = Client(simulation_id=1, fields={"u": ((5,), np.float64)})
        with contextlib.suppress(SimulationRefused):  # (said at a send if known: its watch)
            wrong.send(0, u=np.zeros(5))
        with pytest.raises(SimulationRefused, match=r"float64 \(5,\) where the study's"):
            wrong.close()
        right = Client(simulation_id=2, fields={"u": ((4,), np.float64)})
        right.send(0, u=np.zeros(4))
        right.close()
        assert right.admission_rejected == {}
        # a launched simulation does not ask (the study records its refusal)
        monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", "0")
        launched = Client(simulation_id=3, fields={"u": ((5,), np.float64)})
        launched.send(0, u=np.zeros(5))
        launched.close()


def test_an_older_client_of_another_run_is_told_wrong_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rendezvous the solver read names run-a and a follow socket without RECEIPT_QUERY
    # (13 missing from follow_kinds: the client asks ADMISSION_QUERY, as an older Python
    # client and the C client do); the receiver there serves run-b and drops its HELLO
    # (wrong_run). The query names no run: the receiver's record of that refusal answers
    # refused with the reason and the fix, instead of unknown until the client gives up
    # and only warns.
    read, served = tmp_path / "read", tmp_path / "served"
    read.mkdir()
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(read))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    with running(rendezvous_dir=served, fields={"u": ((4,), np.float64)}, run_id="run-b") as rec:
        entry = json.loads((served / "rank_0.json").read_text())
        older = {**entry, "run_id": "run-a", "follow_kinds": [P.HELD_QUERY, P.ADMISSION_QUERY]}
        (read / "rank_0.json").write_text(json.dumps(older))
        client = Client(simulation_id=3, fields={"u": ((4,), np.float64)})
        assert client.run_id == "run-a"
        client.send(0, u=np.zeros(4))
        deadline = time.monotonic() + 60  # (the HELLO processed: the answer is decided)
        while rec.telemetry()["rejected_wrong_run"] < 1:
            assert time.monotonic() < deadline, "the HELLO was not refused"
            time.sleep(0.01)
        with pytest.raises(SimulationRefused, match=r"serves run run-b \(wrong_run\)") as caught:
            client.close()
        assert rec.refused() == []  # (another run's: not this run's launcher's to kill)
    assert "Start it again (it reads the rendezvous afresh)" in str(caught.value)
    assert client.admission_rejected == {}


def test_admission_round_trips_and_rejects_what_breaks_its_rules() -> None:
    refused = P.encode_admission(3, 9, 1, 2, P.ADMISSION_REFUSED, "é" * 3000)
    reply = P.decode_admission(refused)
    assert (reply.simulation_id, reply.request_id, reply.rank, reply.status) == (3, 9, 1, 2)
    assert reply.reason == "é" * 2048  # (cut to MAX_REASON_BYTES, on a character)
    accepted = P.encode_admission(3, 9, 0, 1, P.ADMISSION_ACCEPTED, "ignored")
    assert P.decode_admission(accepted).reason == ""
    assert P.decode_admission_query(P.encode_admission_query(3, 9)) == (3, 9)
    head = accepted[: P.PREFIX.size]
    bad = {
        "bad_size": accepted + b"x",  # (a reason with status accepted)
        "truncated": accepted[:20],
        "bad_kind": P.encode_held(3, 9, 0, 1, P.HELD_NONE),
        "bad_rank": head + P.ADMISSION_FIXED.pack(9, 2, 2, 1, 0, 0),
        "bad_request": head + P.ADMISSION_FIXED.pack(9, 0, 1, 7, 0, 0),
        "bad_magic": b"XXXX" + accepted[4:],
    }
    bad_utf8 = head + P.ADMISSION_FIXED.pack(9, 0, 1, P.ADMISSION_REFUSED, 0, 2) + b"\xff\xfe"
    for reason, data in [*bad.items(), ("bad_request", bad_utf8)]:
        with pytest.raises(P.ProtocolError) as caught:
            P.decode_admission(data)
        assert caught.value.reason == reason
    with pytest.raises(P.ProtocolError, match="bad_size: ADMISSION_QUERY of 25 bytes"):
        P.decode_admission_query(P.encode_admission_query(3, 9) + b"\0")


def test_the_follow_socket_answers_live_and_drops_malformed_queries() -> None:
    state = {7: (P.ADMISSION_UNKNOWN, "")}
    server = FollowServer({}, 0, 1, "tcp://127.0.0.1:*", admission=lambda sid: state[sid])
    endpoint = server.start()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.connect(endpoint)
        sock.send(P.encode_admission_query(7, 1) + b"\0")  # (too long: dropped)
        sock.send(P.encode_admission_query(7, 2))
        assert sock.poll(10_000)
        assert P.decode_admission(sock.recv()).status == P.ADMISSION_UNKNOWN
        state[7] = (P.ADMISSION_REFUSED, "another grid")
        sock.send(P.encode_admission_query(7, 3))
        assert sock.poll(10_000)
        reply = P.decode_admission(sock.recv())
        assert (reply.request_id, reply.status, reply.reason) == (3, 2, "another grid")
        assert server.rejected == {"bad_size": 1}
    finally:
        sock.close(linger=0)
        ctx.term()
        server.stop()


class FakeFollowSocket:
    """A ROUTER that answers each query with `bad` replies, then with `status`."""

    def __init__(self, bad: list[list[bytes]], status: int, queries: int = 1) -> None:
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.bind("tcp://127.0.0.1:*")
        self.endpoint = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.bad, self.status, self.queries = bad, status, queries
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for i in range(self.queries):
            if not self.router.poll(10_000):
                return
            identity, query = self.router.recv_multipart()
            sid, request = P.decode_admission_query(query)
            for frames in self.bad if i == 0 else []:
                self.router.send_multipart([identity, *frames])
            last = i == self.queries - 1
            status = self.status if last else P.ADMISSION_UNKNOWN
            reason = "refused: another grid" if status == P.ADMISSION_REFUSED else ""
            reply = P.encode_admission(sid, request, 0, 1, status, reason)
            self.router.send_multipart([identity, reply])

    def close(self) -> None:
        self.thread.join()
        self.router.close(linger=0)
        self.ctx.term()


def entries(endpoint: str) -> list[dict[str, object]]:
    return [
        {"rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1", "follow_endpoint": endpoint}
    ]


def test_malformed_replies_are_counted_and_ignored_and_unknown_is_asked_again() -> None:
    bad = [
        [b"junk"],
        [P.encode_admission(7, 999_999, 0, 1, P.ADMISSION_ACCEPTED)],  # (another query's)
        [P.encode_admission(8, 1, 0, 1, P.ADMISSION_ACCEPTED)],  # (another simulation's)
        [P.encode_admission(7, 1, 0, 1, P.ADMISSION_ACCEPTED), b"extra"],
        [P.encode_held(7, 1, 0, 1, P.HELD_NONE)],  # (the other query's answer)
    ]
    fake = FakeFollowSocket(bad, P.ADMISSION_REFUSED, queries=3)
    rejected: Counter[str] = Counter()
    try:
        with pytest.raises(SimulationRefused, match="refused it, and dropped everything"):
            confirm_admitted(entries(fake.endpoint), ["tcp://127.0.0.1:1"], 7, rejected, 30)
    finally:
        fake.close()
    assert sum(rejected.values()) == 5, rejected
    assert rejected["bad_kind"] == 1 and rejected["unexpected_frame"] == 1


def test_no_decided_answer_or_nothing_to_ask_leaves_the_close_as_before() -> None:
    fake = FakeFollowSocket([[b"junk"]], P.ADMISSION_UNKNOWN, queries=1)
    rejected: Counter[str] = Counter()
    try:
        assert (
            confirm_admitted(entries(fake.endpoint), ["tcp://127.0.0.1:1"], 7, rejected, 0.3)
            is False
        )
    finally:
        fake.close()
    assert rejected["truncated"] + rejected["bad_magic"] == 1
    other = [{"endpoint": "tcp://127.0.0.1:1"}]  # (an older trainer: no follow socket)
    assert confirm_admitted(other, ["tcp://127.0.0.1:1"], 7, rejected) is None
    assert confirm_admitted(entries("tcp://x:1"), ["tcp://127.0.0.1:2"], 7, rejected) is None
