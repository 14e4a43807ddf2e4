"""A `send` blocked on a trainer that is gone raises; one blocked on a trainer that is
there (slow, paused) waits (`melissa_trainer.client.send_wait`).

The trainer's receiving side is a real `Receiver` in a process of its own
(`tests/scripts/keys_receiver.py`), killed with SIGKILL (its kernel closes the
connections, every reconnection is refused) or stopped with SIGSTOP (the connections
stay open, nothing is read). Before the fix a send to the killed one blocked forever
once ZeroMQ's queue was full (the small fields' batches) or at once (a large array,
waited for until ZeroMQ is done with it): the test's timeout ended it."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from keys_receiver_process import ReceiverProcess
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.e2e

#: a field batched (the usual send of small fields), and one sent without a copy
SMALL, LARGE = 4, 1 << 18  # float32 elements: 16 B, 1 MiB


@pytest.fixture
def receiver() -> Iterator[ReceiverProcess]:
    rec = ReceiverProcess()
    try:
        yield rec
    finally:
        rec.stop()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("elements", "send_timeout"),
    [(SMALL, None), (LARGE, None), (SMALL, 600.0)],
    ids=["batched", "large", "with-send_timeout"],
)
def test_a_send_to_a_killed_trainer_raises_naming_the_endpoint_and_settings(
    receiver: ReceiverProcess, elements: int, send_timeout: float | None
) -> None:
    """Default tuning but a 1 s `disconnected_timeout` and a small queue: the send
    raises TimeoutError (never returns normally, never hangs: the test's timeout), and
    before a send_timeout of 10 minutes."""
    tuning = ClientTuning(sndhwm=10, disconnected_timeout=1.0)
    fields = {"u": ((elements,), "float32")}
    u = np.ones(elements, np.float32)
    with (
        pytest.raises(TimeoutError) as raised,
        Client(
            fields,
            simulation_id=1,
            endpoints=receiver.endpoint,
            tuning=tuning,
            send_timeout=send_timeout,
        ) as client,
    ):
        client.send(0, u=u)
        client.flush()
        receiver.kill()
        step = 1
        while True:  # until the queue is full and the receiver found gone
            client.send(step, u=u)
            step += 1
    said = str(raised.value)
    assert said.startswith("simulation 1 rank 0: could not send time step "), said
    assert f"to {receiver.endpoint}: the receiver is unreachable" in said, said
    assert "disconnected_timeout=1.0 s" in said, said
    assert "ClientTuning(disconnected_timeout=...)" in said, said
    assert "Client(send_timeout=...)" in said, said
    assert "blocked " in said, said
    assert f"(now {'none' if send_timeout is None else '600.0 s'})" in said, said


@pytest.mark.timeout(120)
def test_a_send_to_a_paused_trainer_waits_and_every_step_arrives_once(
    receiver: ReceiverProcess,
) -> None:
    """SIGSTOP: the sender blocks (its queue full) for many times `disconnected_timeout`
    without an error; SIGCONT: every step is received exactly once, in order, and
    `close` (BYE) ends the stream. 1 MiB steps, 64 of them: more than the kernels' and
    ZeroMQ's buffers hold (a high-water mark of 2 messages)."""
    steps = 64
    tuning = ClientTuning(sndhwm=2, disconnected_timeout=0.2)
    u = np.zeros(LARGE, np.float32)
    client = Client(
        {"u": ((LARGE,), "float32")}, simulation_id=7, endpoints=receiver.endpoint, tuning=tuning
    )
    client.send(0, u=u)
    client.flush()
    os.kill(receiver.proc.pid, signal.SIGSTOP)
    sent: list[int] = []
    failed: list[BaseException] = []

    def sender() -> None:
        try:
            for t in range(1, steps):
                client.send(t, u=u)
                sent.append(t)
            client.close()
        except BaseException as exc:  # (reported by the test's thread)
            failed.append(exc)

    thread = threading.Thread(target=sender, name="sender")
    thread.start()
    # blocked long past disconnected_timeout (0.2 s) and its slices (0.5 s): a send that
    # took the paused trainer for a dead one would have raised by now
    thread.join(timeout=5.0)
    assert not failed, failed
    assert thread.is_alive() and len(sent) < steps - 1, "the sends did not block"
    os.kill(receiver.proc.pid, signal.SIGCONT)
    thread.join(timeout=60)
    assert not thread.is_alive() and not failed, failed
    assert receiver.keys() == [(7, t) for t in range(steps)]


@pytest.mark.timeout(120)
def test_the_monitor_a_blocked_send_read_still_tells_the_close_that_the_trainer_died(
    receiver: ReceiverProcess,
) -> None:
    """One monitor per socket, read by every wait: a send blocked on a paused trainer
    reads it (its watch begun), then goes through; the trainer is then killed, and a
    close without `close_timeout` gives up on it after `disconnected_timeout`
    (TimeoutError naming the endpoint). Where the send's wait set up a monitor of its
    own and stopped it when done (ZeroMQ keeps one per socket: it replaced the one the
    close reads), the close heard nothing more and waited for ever (the test's timeout).
    """
    steps = 64
    tuning = ClientTuning(sndhwm=2, disconnected_timeout=0.5, close_timeout=None)
    u = np.zeros(LARGE, np.float32)
    client = Client(
        {"u": ((LARGE,), "float32")}, simulation_id=7, endpoints=receiver.endpoint, tuning=tuning
    )
    wait = client._transport.wait  # (the send's waits: whether one read the monitors)
    client.send(0, u=u)
    client.flush()
    os.kill(receiver.proc.pid, signal.SIGSTOP)
    failed: list[BaseException] = []

    def sender() -> None:
        try:
            for t in range(1, steps):
                client.send(t, u=u)
            client.flush()
        except BaseException as exc:  # (reported by the test's thread)
            failed.append(exc)

    thread = threading.Thread(target=sender, name="sender")
    thread.start()
    try:
        wait_until(lambda: wait.watch is not None or not thread.is_alive(), "no send blocked", 30.0)
        assert thread.is_alive() and not failed, failed
        os.kill(receiver.proc.pid, signal.SIGCONT)
        thread.join(timeout=60)
        assert not thread.is_alive() and not failed, failed
        assert wait.watch is None  # (the send's wait is over)
        receiver.kill()
        with pytest.raises(TimeoutError) as raised:
            client.close()
    finally:
        if receiver.proc.poll() is None:
            os.kill(receiver.proc.pid, signal.SIGCONT)  # (the fixture kills it)
        thread.join(timeout=60)
    said = str(raised.value)
    assert f"to {receiver.endpoint}: the receiver is unreachable" in said, said
    assert "disconnected_timeout=0.5 s" in said, said
