"""A close waiting on a receiver that is up (a trainer that is slow or paused: the
client's messages queued) reads no stop record in its transport's wait: no receiver is
down, so none can say why it went (`patience.CloseWait.until_done`, as its `stopped`
look already was). Before, it asked `preempted` (`RestartCheck.preempted`: a stat of
every receiver's rendezvous file) each slice (`patience.SLICE`) of the wait: hundreds
of clients on a shared filesystem, for nothing. Failed before the change (a read a slice).

A real socket connected to a real ZeroMQ peer on 127.0.0.1 (its handshake completed,
never disconnected), watched by the client's monitors (`Handshakes`); the attempt the
wait retries stands in for a send blocked on a full queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import zmq
from waiting import wait_until

from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.patience import CloseWait

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def connected() -> Iterator[tuple[zmq.Socket, Handshakes, str]]:
    """A PUSH socket, its monitors and its peer's endpoint, once its handshake completed."""
    ctx = zmq.Context()
    try:
        peer = ctx.socket(zmq.PULL)
        port = peer.bind_to_random_port("tcp://127.0.0.1")
        endpoint = f"tcp://127.0.0.1:{port}"
        sock, handshakes = ctx.socket(zmq.PUSH), Handshakes()
        handshakes.watch(sock, False)
        sock.connect(endpoint)

        def accepted() -> bool:
            handshakes.read()
            return handshakes.accepted()

        wait_until(accepted, "the peer's handshake")
        yield sock, handshakes, endpoint
    finally:
        ctx.destroy(linger=0)


def test_a_close_waiting_on_a_receiver_that_is_up_reads_no_stop_record(
    connected: tuple[zmq.Socket, Handshakes, str],
) -> None:
    sock, handshakes, endpoint = connected
    reads: list[str] = []

    def preempted() -> str | None:
        reads.append("preempted")
        return None

    def stopped() -> None:
        reads.append("stopped")

    wait = CloseWait(
        [sock], [endpoint], 1.6, 600.0, handshakes=handshakes, stopped=stopped,
        preempted=preempted,
    )  # fmt: skip

    def blocked(deadline: float) -> None:
        # (a send on a full queue: blocked until its slice's deadline, then zmq.Again)
        threading.Event().wait(max(0.0, deadline - time.monotonic()))
        raise zmq.Again

    why = wait.until_done(blocked, zmq.Again)
    assert why is not None and "close_timeout=1.6 s" in why, why
    handshakes.read()
    assert handshakes.down_since == [None]  # (the peer was up all along)
    assert reads == []  # (before: "preempted" once a slice)
