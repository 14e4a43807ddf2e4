"""A client blocked on a trainer killed follows its restarted trainer as soon as that
trainer publishes in the rendezvous, not once `disconnected_timeout` ran out
(`following.Following.seen`, read by `send_wait.SendWait` and `patience.CloseWait` while
a receiver is disconnected).

A user trial (2026-12-01): a trainer killed with ``kill -9`` mid-stream and resumed
with ``--resume_from_checkpoint latest``. The C solver followed it at once; the Python
solver waited out its `disconnected_timeout` first (~50 s later), and only then looked
at the rendezvous. Here `disconnected_timeout` and `follow_timeout` are an hour (`LONG`),
far beyond the tests' timeout: a client that waited them out before following never
ends its send (or close) within the test, which its timeout marker then fails (the
stack shows it in the join of the client's thread); one that followed ends on B
(`run_id` "run-b"). No clock is read.

The trainers are real `Receiver`s in processes of their own (`keys_receiver_process`):
A killed, B started on the same rendezvous under another run id, with no checkpoint
(its HELD holds nothing: the client sends every step again from its replay window).
The oracle: B has every step once, and the blocked send or close returned soon.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from keys_receiver_process import ReceiverProcess, closing
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.following import Following
from melissa_trainer.stream.endpoints import mark_stopped

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

STEPS = 12
LOGGER = "melissa_trainer.client.client"
#: the client's disconnected and follow timeouts: far beyond this module's timeout
#: (180 s), so that a wait for them fails a test by its timeout marker, whatever the load
LONG = 3600.0
#: what the notice of a wait on the receiver gone says (`closing.waiting_notice`)
NOTICE = re.compile(r"(sending time step \d+|closing), the trainer's receiver at ")


@pytest.fixture
def rendezvous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The rendezvous directory, named to the client as a solver run by hand names it."""
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def trainers(rendezvous: Path) -> Iterator[list[ReceiverProcess]]:
    """Trainer A (started), and B once the test starts it (appended); each stopped."""
    made = [ReceiverProcess("--rendezvous", str(rendezvous), "--run_id", "run-a")]
    try:
        yield made
    finally:
        for proc in made:
            proc.stop()


def client() -> Client:
    tuning = ClientTuning(disconnected_timeout=LONG, follow_timeout=LONG, sndhwm=2, batch_bytes=0)
    return Client(simulation_id=3, fields={"u": ((4,), np.float64)}, tuning=tuning)


def sent(c: Client, steps: range) -> None:
    for t in steps:
        c.send(t, u=np.full(4, t, np.float64))


def kill_a(c: Client, a: ReceiverProcess) -> None:
    """SIGKILL A once it has the first steps, and wait until the client's monitor saw
    its receiver disconnected."""
    sent(c, range(STEPS))
    c.flush()
    a.kill()
    handshakes = c._transport.handshakes  # (its one reader: the client's thread, idle now)

    def disconnected() -> bool:
        handshakes.read()
        return handshakes.down_since[0] is not None

    wait_until(disconnected, "the client's monitor to see A gone", 30.0)


def blocked(caplog: pytest.LogCaptureFixture) -> None:
    """Wait for the notice that a send or close waits on the receiver gone (said once
    it has been down `peer_watch.notice_after` s): the wait is under way. It says that a
    restarted trainer is followed as soon as it publishes (`gave_up.waits_for`)."""

    def notices() -> list[str]:
        said = (r.getMessage() for r in caplog.records if r.name == LOGGER)
        return [m for m in said if NOTICE.search(m)]

    wait_until(notices, "the wait's notice", 60.0)
    assert "and follows it (at once if it publishes sooner): up to " in notices()[0]


def start_b(trainers: list[ReceiverProcess], rendezvous: Path) -> None:
    """Start B on A's rendezvous (published before its endpoint is printed)."""
    trainers.append(ReceiverProcess("--rendezvous", str(rendezvous), "--run_id", "run-b"))


def test_a_send_blocked_on_a_killed_trainer_follows_its_restart_at_once(
    trainers: list[ReceiverProcess], rendezvous: Path, caplog: pytest.LogCaptureFixture
) -> None:
    c = client()
    total = STEPS + 20  # (sndhwm=2: a few of them fill the queue, the next blocks)
    failed: list[BaseException] = []

    def send_rest() -> None:
        try:
            sent(c, range(STEPS, total))
        except BaseException as exc:  # noqa: BLE001 - the test's oracle
            failed.append(exc)

    thread = threading.Thread(target=send_rest, name="sending", daemon=True)
    try:
        kill_a(c, trainers[0])
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            thread.start()
            blocked(caplog)
            start_b(trainers, rendezvous)
            # (a send that waits out disconnected_timeout=LONG before following B is
            # still here when the timeout marker ends the test)
            thread.join()
        assert not failed, failed
        assert c.run_id == "run-b"  # it followed B
    finally:
        if not thread.is_alive():  # (else stuck in its send: the failure said so)
            c.close(bye=not failed)
    taken = trainers[1].keys()  # (once B ended: the BYE came)
    assert sorted(s for _, s in taken) == list(range(total))  # each once


def test_a_close_waiting_on_a_killed_trainer_follows_its_restart_at_once(
    trainers: list[ReceiverProcess], rendezvous: Path, caplog: pytest.LogCaptureFixture
) -> None:
    c = client()
    kill_a(c, trainers[0])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        thread, failed = closing(c)
        blocked(caplog)
        start_b(trainers, rendezvous)
        # (a close that waits out disconnected_timeout=LONG before following B is still
        # here when the timeout marker ends the test)
        thread.join()
    assert not failed, failed
    assert c.run_id == "run-b"  # it followed B
    taken = trainers[1].keys()  # (once B ended: the BYE came)
    assert sorted(s for _, s in taken) == list(range(STEPS))  # each once


def entry(rank: int, world: int, port: int, run_id: str) -> dict[str, object]:
    return {
        "version": 1,
        "rank": rank,
        "world_size": world,
        "endpoint": f"tcp://127.0.0.1:{port}",
        "run_id": run_id,
    }


def test_seen_names_only_another_complete_run(tmp_path: Path) -> None:
    """`Following.seen` (a stat while a receiver is down): nothing for the client's own
    trainer's files, rewritten unchanged or marked stopped, nor for a rendezvous half
    rewritten by another run (rank 1 still the old one's); the new run once complete."""

    def write(rank: int, port: int, run_id: str) -> None:
        path = tmp_path / f"rank_{rank}.json"
        temporary = tmp_path / f".rank_{rank}.tmp"
        temporary.write_text(json.dumps(entry(rank, 2, port, run_id)))
        temporary.replace(path)  # (a new inode: as a trainer writes it)

    write(0, 1000, "run-a")
    write(1, 1001, "run-a")
    following = Following.made_for(
        str(tmp_path), 1024, 300.0, 3, 0, "run-a", ["tcp://127.0.0.1:1000", "tcp://127.0.0.1:1001"]
    )
    assert following is not None
    assert following.seen() is None  # (unchanged)
    write(0, 1000, "run-a")  # (its own trainer's file, rewritten unchanged)
    assert following.seen() is None
    mark_stopped(str(tmp_path), 0, "tcp://127.0.0.1:1000")  # (its own, stopped: not new)
    assert following.seen() is None
    write(0, 2000, "run-b")  # (another run, rank 1 not yet: not complete)
    assert following.seen() is None
    write(1, 2001, "run-b")
    write(0, 2000, "run-b")  # (rank 0 last: what the follower stats)
    seen = following.seen()
    assert seen is not None and "run-b" in seen, seen
