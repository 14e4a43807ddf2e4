"""Backpressure and delivery: a send that times out under backpressure loses nothing, a
send blocks until the receiver reads, `close` reports (and logs) what was not delivered,
and a worker sharing one ZeroMQ context delivers every simulation.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import zmq
from client_runs import GOOD, TWO_FRAME_SHAPE, Receiver, free_port
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as p
from melissa_trainer.client import INLINE_MAX_BYTES, Client, ClientTuning, DeliveryFailed

pytestmark = pytest.mark.usefixtures("_clean_environment")


INLINE_SHAPE = (INLINE_MAX_BYTES // 8,)  # 64 KiB of float64: one frame


def stalled_pair(zctx: zmq.Context, shape: tuple[int, ...], **client_args: Any) -> tuple:
    """A receiver that does not read yet, and a client: tiny queues and socket buffers.

    (A large array's `send` returns once the array is in the receiver's queue: the
    receiver has room for 3 messages, so that a few large sends go through.)
    """
    receiver = Receiver(zctx, RCVHWM=1 if shape == INLINE_SHAPE else 4, RCVBUF=4096)
    client = Client(
        {"u": (shape, "f8")},
        simulation_id=6,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(sndhwm=2, socket_options={zmq.SNDBUF: 4096}, close_timeout=10),
        **client_args,
    )
    return receiver, client


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shape", [INLINE_SHAPE, TWO_FRAME_SHAPE], ids=["inline", "two_frames"])
def test_send_timeout_under_backpressure_loses_nothing(
    zctx: zmq.Context, shape: tuple[int, ...]
) -> None:
    # 2 s, not 0.3: a 1 MiB send that goes through crosses 4 KiB socket buffers (the
    # first one the connection too), which took over 0.3 s on a loaded machine
    receiver, c = stalled_pair(zctx, shape, send_timeout=2.0)
    sent = []
    with c:
        for step in range(1000):
            try:
                c.send(step, u=np.full(shape, step, float))
            except TimeoutError as exc:
                assert "back-pressure" in str(exc) and "send_timeout=2.0" in str(exc)
                assert isinstance(exc, DeliveryFailed)  # (a worker goes on after it)
                timed_out = step
                break
            sent.append(step)
        else:
            pytest.fail("back-pressure never blocked the client")
        assert c.steps_sent == len(sent) >= 1
        # the receiver starts reading: what was sent arrives, then close() can send BYE
        messages = [receiver.recv() for _ in range(1 + len(sent))]
    messages += receiver.until_bye()
    assert isinstance(messages[0], p.Hello)
    data = [m for m in messages if isinstance(m, p.Data)]
    assert all(np.all(m.payload == m.time_step) for m in data)
    steps = [m.time_step for m in data]
    if shape == INLINE_SHAPE:  # a one-frame message that timed out was not queued
        assert steps == sent
    else:  # a large array that timed out waiting to be released is still delivered
        assert steps in (sent, [*sent, timed_out])
    assert messages[-1] == p.Bye(6, 0, 1, len(sent))


@pytest.mark.timeout(30)
def test_backpressure_blocks_until_the_receiver_reads(zctx: zmq.Context) -> None:
    receiver, c = stalled_pair(zctx, INLINE_SHAPE)  # no send_timeout: blocks as needed
    got: list[p.Message] = []
    reading = threading.Event()  # set as the receiver begins to read
    sent = threading.Event()  # set once every send returned
    wait = c._transport.wait  # (the sends' waits: `watch` is set while one is blocked)

    def read_once_blocked() -> None:
        # A send that ran out of its slice (SNDTIMEO) waits in `SendWait.retry`, watching
        # the receivers (`watch`) until it goes through: the reader begins then. (Before:
        # a 0.5 s sleep, "the client fills every queue meanwhile", a guess at the timing.)
        try:
            wait_until(
                lambda: wait.watch is not None or sent.is_set(),
                "a send blocked",
                timeout=UNTIL_TEST_TIMEOUT,
            )
        finally:  # (read even so: a send blocked unwatched must not hang the test)
            reading.set()
            got.extend(receiver.until_bye(timeout=10))

    reader = threading.Thread(target=read_once_blocked)
    reader.start()
    with c:
        for step in range(60):
            c.send(step, u=np.full(INLINE_SHAPE, step, float))
        # 60 x 64 KiB cannot all be queued (a few messages' room): a send blocked, and
        # went through once the reader read. (An event, not a time: "blocked >= 0.4 s",
        # timed from after the reader's 0.5 s had begun, held only while the machine was
        # quick.)
        sent_before_reading = not reading.is_set()
        sent.set()
    reader.join(timeout=20)
    assert not sent_before_reading, "every send went through with nobody reading"
    data = [m for m in got if isinstance(m, p.Data)]
    assert [m.time_step for m in data] == list(range(60))
    assert all(np.all(m.payload == m.time_step) for m in data)
    assert got[-1] == p.Bye(6, 0, 1, 60)


@pytest.mark.timeout(30)
def test_close_reports_undelivered_messages() -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"  # nobody listens there
    # (disconnected_timeout far beyond this test's timeout: a close that waited for it
    # fails by the timeout marker; the words say close_timeout ended it, no clock read)
    tuning = ClientTuning(close_timeout=0.3, disconnected_timeout=3600.0)
    c = Client(GOOD, simulation_id=1, endpoints=endpoint, tuning=tuning)
    c.send(0, u=np.ones((2, 3), np.float32))
    with pytest.raises(TimeoutError, match="not delivered within close_timeout=0.3"):
        c.close()


@pytest.mark.timeout(30)
def test_close_with_the_callers_context_says_when_nothing_was_delivered() -> None:
    """With a context of the caller's, closing a socket does not wait for ZeroMQ to
    deliver (the socket lingers in the background and drops what is left, silently):
    `close` must still find out, or a worker sharing one context reports a simulation
    finished whose data never left (found by tests/launcher/test_scale.py: "exit 0, no HELLO")."""
    context = zmq.Context()
    try:
        client = Client(
            {"u": ((4,), "float32")},
            simulation_id=1,
            endpoints=f"tcp://127.0.0.1:{free_port()}",  # nobody listens there
            tuning=ClientTuning(close_timeout=0.5, disconnected_timeout=3600.0),  # (as above)
            context=context,
        )
        client.send(0, u=np.zeros(4, np.float32))
        with pytest.raises(TimeoutError, match="not delivered within close_timeout=0.5"):
            client.close()
    finally:
        context.term()


@pytest.mark.timeout(30)
def test_a_worker_sharing_one_context_delivers_every_simulation() -> None:
    """One context for many clients (worker mode): each close returns once its BYE has
    left, and the receiving end gets every simulation whole."""
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        for sid in range(20):
            with Client(
                {"u": ((4,), "float32")},
                simulation_id=sid,
                endpoints=f"tcp://127.0.0.1:{port}",
                context=context,
            ) as client:
                for t in range(3):
                    client.send(t, u=np.full(4, t, np.float32))
        kinds = []
        while pull.poll(1000):
            frames = pull.recv_multipart()
            kinds.append(type(p.decode(frames[0], frames[1] if len(frames) > 1 else None)))
        assert kinds.count(p.Hello) == 20 and kinds.count(p.Bye) == 20
    finally:
        pull.close(linger=0)
        context.term()
