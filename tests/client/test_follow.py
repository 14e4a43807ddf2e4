"""A running client follows a restarted trainer (`melissa_trainer.client.follow`), over
real sockets and in-process receivers: receiver A (the first trainer) takes a checkpoint
(its record and its buffer), takes more steps, stops; receiver B resumes from that
checkpoint under a new run id, on a random port or on A's port; the client, still
streaming, asks B what it holds and sends the rest again from its replay window.

The oracle: B's buffer (the checkpoint's samples plus what B received) holds every
time step once. A window too small fails with the advice to run the simulation again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import drain

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning, follow
from melissa_trainer.client.follow import FollowError
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = pytest.mark.timeout(120)

SID = 7
FIELDS = {"u": ((3,), "<f4")}
STEP_BYTES = 12


def wait_until(what: str, ready: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll `ready` (a receiver's counter: no event to wait on) until true."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def field(t: int) -> np.ndarray:
    return np.full(3, t, dtype="<f4")


class Restart:
    """Receivers A then B in `tmp`'s rendezvous, B resumed from A's checkpoint."""

    def __init__(self, tmp: Path) -> None:
        self.rendezvous = tmp / "rendezvous"
        self.a_buffer = FIFOBuffer(1000)
        self.a = Receiver(self.a_buffer, config=self._config("run-a", "tcp://127.0.0.1:*"))
        self.b: Receiver | None = None
        self.b_buffer = FIFOBuffer(1000)
        self.a.start()

    def _config(self, run_id: str, bind: str) -> ReceiverConfig:
        return ReceiverConfig(
            expected_simulations=1, bind=bind, rendezvous_dir=str(self.rendezvous), run_id=run_id
        )

    def checkpoint(self, steps: int) -> None:
        """Once A has put `steps` samples: its record and buffer, as a trainer's."""
        wait_until("A's samples", lambda: self.a_buffer.stats().put == steps)
        self.record = self.a.state_dict()
        self.buffer_state = self.a_buffer.state_dict()

    def resume(self, same_port: bool) -> None:
        self.a.stop()
        assert self.a.endpoint is not None
        bind = self.a.endpoint if same_port else "tcp://127.0.0.1:*"
        self.b_buffer.load_state_dict(*self.buffer_state)
        self.b = Receiver(self.b_buffer, config=self._config("run-b", bind))
        self.b.load_state_dict(self.record)
        self.b.start()

    def close(self) -> None:
        self.a.stop()
        if self.b is not None:
            self.b.stop()


@pytest.fixture
def restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Restart]:
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "rendezvous"))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(follow, "CHECK_INTERVAL", 0.0)  # (every send looks: deterministic)
    made = Restart(tmp_path)
    try:
        yield made
    finally:
        made.close()


def client(replay_bytes: int | None = None) -> Client:
    tuning = ClientTuning(replay_bytes=replay_bytes, disconnected_timeout=2, follow_timeout=30)
    return Client(FIELDS, {}, simulation_id=SID, tuning=tuning)


@pytest.mark.parametrize("same_port", [False, True], ids=["random_port", "fixed_port"])
def test_a_running_client_follows_a_resumed_trainer_and_each_step_arrives_once(
    restart: Restart, same_port: bool
) -> None:
    with client() as c:  # (external mode: the default window)
        for t in range(5):
            c.send(t, u=field(t))
        c.flush()
        restart.checkpoint(5)
        for t in range(5, 10):  # taken by A after its checkpoint: lost with it
            c.send(t, u=field(t))
        c.flush()
        wait_until("A's later samples", lambda: restart.a_buffer.stats().put == 10)
        restart.resume(same_port)
        for t in range(10, 15):
            c.send(t, u=field(t))
        assert c.run_id == "run-b"
    samples = drain(restart.b_buffer)
    steps = sorted(int(s["time_step"]) for s in samples)
    assert steps == list(range(15))  # each once: the checkpoint's 0-4, then 5-14
    for s in samples:
        assert np.array_equal(s["u"], field(int(s["time_step"])))


def test_a_restart_found_at_close_is_followed(restart: Restart) -> None:
    with client() as c:
        for t in range(6):
            c.send(t, u=field(t))
        c.flush()
        restart.checkpoint(6)
        restart.resume(same_port=False)
    steps = sorted(int(s["time_step"]) for s in drain(restart.b_buffer))
    assert steps == list(range(6))


def test_a_window_too_small_fails_with_the_advice_to_run_again(restart: Restart) -> None:
    c = client(replay_bytes=3 * STEP_BYTES)  # the last 3 steps
    try:
        for t in range(5):
            c.send(t, u=field(t))
        c.flush()
        restart.checkpoint(5)
        for t in range(5, 10):
            c.send(t, u=field(t))
        c.flush()
        restart.resume(same_port=False)
        with pytest.raises(FollowError) as caught:
            c.send(10, u=field(10))
        said = str(caught.value)
        assert "lacks 2 time step(s)" in said and "(5, 6)" in said, said
        assert f"replay_bytes={3 * STEP_BYTES}" in said, said
        assert f"MELISSA_TRAINER_SIMULATION_ID={SID}" in said, said
    finally:
        c.close(bye=False)


def test_without_a_window_a_client_does_not_follow(restart: Restart) -> None:
    c = client(replay_bytes=0)
    try:
        c.send(0, u=field(0))
        c.flush()
        restart.checkpoint(1)
        restart.resume(same_port=False)
        c.send(1, u=field(1))  # (queued for the old endpoint: nothing notices)
        assert c.run_id == "run-a"
    finally:
        c.close(bye=False)


def test_rewritten_reads_each_rewrite_of_the_rendezvous_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Follower.rewritten` (`Client.predict` while its requests fail, at every request):
    a restarted trainer is noticed at the first call after it published itself, not at
    the send's pace (once a second); a rewrite that names no new run (the old trainer
    marking its file stopped) is read once, not at every call."""
    from melissa_trainer.stream.endpoints import mark_stopped, write_rendezvous

    rendezvous = tmp_path / "rv"
    write_rendezvous(rendezvous, 0, 1, "tcp://127.0.0.1:1", {"run_id": "run-a"})
    follower = follow.Follower(str(rendezvous), 0, "run-a", ["tcp://127.0.0.1:1"])
    reads = 0
    fetch = follow.fetch_rendezvous

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return fetch(*args, **kwargs)

    monkeypatch.setattr(follow, "fetch_rendezvous", counted)
    monkeypatch.setattr(follower, "due_at", float("inf"))  # (the send's pace: never here)
    assert follower.rewritten() is None and reads == 0  # unchanged: one stat, no read
    mark_stopped(rendezvous, 0, "tcp://127.0.0.1:1")
    for _ in range(100):
        assert follower.rewritten() is None
    assert reads == 1  # the stopped file read once
    write_rendezvous(rendezvous, 0, 1, "tcp://127.0.0.1:2", {"run_id": "run-b"})
    entries = follower.rewritten()
    assert entries is not None and entries[0]["run_id"] == "run-b" and reads == 2
