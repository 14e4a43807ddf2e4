"""A client whose trainer is gone says, when the rendezvous it read now names another run
(the trainer was restarted, `--resume_from_checkpoint`), that it does not follow the
restart and what to do: run the simulation again with the same id
(`melissa_trainer.client.restart`).

The trainers are PULL sockets of this process that publish themselves as the receivers
do (`write_rendezvous`, with a run id); "killing" one closes its socket: its connections
end and every reconnection is refused, as after a SIGKILL or a preempted trainer's exit.
Before, both the blocked send and the close said only "the trainer died, or its node".
The successor binds before its predecessor dies: a random port freed just before could
be given again, and the client would then reconnect to it (as with a fixed port). A
message sent before the client has seen its connection end is written into the dead
connection and counts as delivered: the close tests send theirs after (`seen_down`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream.endpoints import write_rendezvous

pytestmark = pytest.mark.timeout(60)

FIELDS = {"u": ((4,), "float32")}
U = np.ones(4, np.float32)


class Trainers:
    """Pull sockets standing for a trainer and its restarted successor, publishing in
    one rendezvous directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.context = zmq.Context()
        self.sockets: list[zmq.Socket] = []

    def start(self, run_id: str) -> str:
        """A trainer of `run_id` bound on a free port and published; its endpoint."""
        sock = self.context.socket(zmq.PULL)
        sock.linger = 0
        sock.bind("tcp://127.0.0.1:*")
        self.sockets.append(sock)
        endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        write_rendezvous(self.directory, 0, 1, endpoint, {"run_id": run_id})
        return endpoint

    def kill(self, index: int) -> None:
        self.sockets[index].close(linger=0)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close(linger=0)
        self.context.term()


@pytest.fixture
def trainers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Trainers]:
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    monkeypatch.delenv("MELISSA_TRAINER_RUN_ID", raising=False)
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "rendezvous"))
    monkeypatch.setenv("MELISSA_TRAINER_REPLAY_BYTES", "0")  # (no window: no following)
    made = Trainers(tmp_path / "rendezvous")
    try:
        yield made
    finally:
        made.close()


def seen_down(c: Client, timeout: float = 30.0) -> None:
    """Wait until the client's monitor has seen its receiver's connection end: a message
    ZeroMQ writes before that goes into the dead connection, and counts as sent (the
    close then finds nothing left to deliver)."""
    handshakes = c._transport.handshakes  # (the one reader of the socket's monitor)
    deadline = time.monotonic() + timeout
    while True:
        handshakes.read()
        if handshakes.down_since[0] is not None:
            return
        assert time.monotonic() < deadline, "the client never saw its receiver go"
        time.sleep(0.01)


def client(sndhwm: int = 10) -> Client:
    return Client(
        FIELDS, simulation_id=7, tuning=ClientTuning(sndhwm=sndhwm, disconnected_timeout=1.0)
    )


def test_a_send_blocked_on_a_trainer_that_restarted_says_so_and_what_to_do(
    trainers: Trainers,
) -> None:
    first = trainers.start("aaaa")
    with pytest.raises(TimeoutError) as raised, client() as c:
        c.send(0, u=U)
        c.flush()
        second = trainers.start("bbbb")  # (bound first: never the port of the first)
        trainers.kill(0)
        step = 1
        while True:  # until the queue is full and the receiver found gone
            c.send(step, u=U)
            step += 1
    said = str(raised.value)
    assert f"to {first}: the receiver is unreachable" in said, said
    restarted = f"The trainer was restarted: the rendezvous {trainers.directory} now names"
    assert f"{restarted} run bbbb at {second}" in said, said
    again = "run this simulation again, with the same simulation id"
    assert f"{again} (MELISSA_TRAINER_SIMULATION_ID=7)" in said, said


def test_a_close_that_gives_up_on_a_trainer_that_restarted_says_so(trainers: Trainers) -> None:
    trainers.start("aaaa")
    c = client(sndhwm=1000)
    c.send(0, u=U)
    c.flush()
    second = trainers.start("bbbb")  # (bound first: never the port of the first)
    trainers.kill(0)
    seen_down(c)
    c.send(1, u=U)  # (queued: the close gives up on it)
    with pytest.raises(TimeoutError) as raised:
        c.close()
    said = str(raised.value)
    assert "not delivered" in said, said
    assert f"now names run bbbb at {second}" in said, said
    assert "MELISSA_TRAINER_SIMULATION_ID=7" in said, said


def test_a_trainer_gone_without_a_successor_is_not_called_restarted(trainers: Trainers) -> None:
    """The rendezvous still names the dead run: nothing is said of a restart."""
    trainers.start("aaaa")
    c = client(sndhwm=1000)
    c.send(0, u=U)
    c.flush()
    trainers.kill(0)
    seen_down(c)
    c.send(1, u=U)
    with pytest.raises(TimeoutError) as raised:
        c.close()
    said = str(raised.value)
    assert "the receiver is unreachable" in said, said
    assert "restarted" not in said, said


def test_a_client_with_a_replay_window_is_not_told_it_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user trial's external solver (a 64 MiB window) failed its follow, and the
    message chained to it said "A simulation without a replay window
    (ClientTuning.replay_bytes=0) does not follow a restarted trainer". The note knows
    the client's window: with one it says the client follows, and when it cannot."""
    from melissa_trainer.client import client as client_module
    from melissa_trainer.client.restart import RestartCheck

    directory = tmp_path / "rendezvous"
    write_rendezvous(directory, 0, 1, "tcp://127.0.0.1:2", {"run_id": "bbbb"})
    with_window = RestartCheck(str(directory), ["tcp://127.0.0.1:1"], "aaaa", 7, 1 << 20)
    said = with_window.note()
    assert "now names run bbbb at tcp://127.0.0.1:2" in said, said
    assert "follows it with its replay window (ClientTuning.replay_bytes=1048576)" in said
    assert "without a replay window" not in said, said
    assert "(MELISSA_TRAINER_SIMULATION_ID=7)" in said, said
    without = RestartCheck(str(directory), ["tcp://127.0.0.1:1"], "aaaa", 7).note()
    assert "A simulation without a replay window (ClientTuning.replay_bytes=0)" in without

    # and a client gives its window to its check
    given: list[int] = []

    class Spy(RestartCheck):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            given.append(self._window)

    monkeypatch.setattr(client_module, "RestartCheck", Spy)
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    monkeypatch.delenv("MELISSA_TRAINER_RUN_ID", raising=False)
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(directory))
    monkeypatch.setenv("MELISSA_TRAINER_REPLAY_BYTES", "2000000")
    context = zmq.Context()
    sock = context.socket(zmq.PULL)
    sock.linger = 0
    try:
        sock.bind("tcp://127.0.0.1:*")
        endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        write_rendezvous(directory, 0, 1, endpoint, {"run_id": "cccc"})
        with Client(FIELDS, simulation_id=7) as c:
            c.send(0, u=U)
    finally:
        sock.close(linger=0)
        context.term()
    assert given == [2_000_000], given
