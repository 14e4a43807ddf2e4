"""Pumping: the caller's thread ingests while it pumps and the receiver's thread takes over
when it stops; a pump never blocks on a full buffer, a waiting pump or reader ingests what
arrives itself (polling as little as it can, taking the socket over from the serving
thread), and `wait_for` ingests until the buffer holds n samples.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import zmq
from helpers import running
from receiver_runs import U, batch, data, pushes, send, tel, value
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer, Sample
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverTuning

#: a pump's or a wait's bound that the code must not sit out: far beyond every test's
#: timeout here, so that a wait for it fails the test by its timeout marker (no clock read)
LONG_WAIT = 3600.0


class ThreadRecordingFIFO(FIFOBuffer):
    """Records the thread that inserted each sample."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.threads: list[str] = []

    def put(self, sample: Sample, timeout: float | None = None) -> None:
        super().put(sample, timeout)
        self.threads.append(threading.current_thread().name)

    def put_available(self, samples: Any) -> int:
        n = super().put_available(samples)
        self.threads += [threading.current_thread().name] * n
        return n


@pytest.mark.timeout(30)
def test_pumping_ingests_in_the_calling_thread() -> None:
    buf = ThreadRecordingFIFO(10_000)
    # the thread steps in only after an hour without a pump: however long a loaded machine
    # stalls this thread between two pumps, only the pumps ingest (it took a 1 s takeover
    # before, and the thread ingested some of the 200 when this thread stalled longer)
    tuning = ReceiverTuning(takeover=LONG_WAIT)
    with running(buf, tuning=tuning) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        # the thread took it: nobody pumps yet
        wait_until(lambda: tel(rec, "messages") == 1, "the thread's HELLO", UNTIL_TEST_TIMEOUT)
        # pumps until one serves: the thread has seen them and left (a fixed sleep could
        # end before it did)
        wait_until(rec.pump, "a pump that serves", UNTIL_TEST_TIMEOUT)
        for t in range(50):
            send(s, data(1, t, U, value(1, t, U)))
        send(s, batch(1, list(range(50, 200)), U))
        while tel(rec, "samples_put") < 200:  # (none ingested: the timeout marker ends it)
            rec.pump(0.1)  # (waits on the socket, not on a clock)
        assert set(buf.threads) == {threading.current_thread().name}
        samples = buf.get_batch(200, timeout=5)
    assert [int(x["time_step"]) for x in samples] == list(range(200))


@pytest.mark.timeout(30)
def test_the_thread_takes_over_when_pumps_stop() -> None:
    buf = ThreadRecordingFIFO(10_000)
    with running(buf, tuning=ReceiverTuning(takeover=0.3)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the thread's HELLO", UNTIL_TEST_TIMEOUT)
        wait_until(rec.pump, "a pump that serves", UNTIL_TEST_TIMEOUT)  # the caller's socket
        send(s, batch(1, list(range(100)), U))  # no pump any more: the thread's turn
        # (a thread that never took over leaves them waiting: the wait fails)
        wait_until(
            lambda: tel(rec, "samples_put") == 100, "the thread's samples", UNTIL_TEST_TIMEOUT
        )
        assert set(buf.threads) == {"melissa-receiver-0"}
        samples = buf.get_batch(100, timeout=5)
    assert [int(x["time_step"]) for x in samples] == list(range(100))


@pytest.mark.timeout(60)
def test_stop_wakes_the_thread_that_naps_while_pumps_come() -> None:
    """While the reader pumps, the receiver's thread naps between two looks at the
    pumps (up to `poll_interval`); `stop` wakes it. It slept its nap out before, so
    `stop` waited up to `poll_interval` (0.1 s by default) at the end of every training
    run, inside the timed window of issue 42's pinned row. Here the nap (30 s) outlasts
    `stop`'s bounded wait (5 s): a thread that does not wake is still alive after `stop`."""
    tuning = ReceiverTuning(poll_interval=30.0, takeover=600.0, stop_timeout=5.0)
    rec = Receiver(FIFOBuffer(100), tuning=tuning)
    rec.start()
    try:
        with pushes(rec.endpoint) as (s,):
            rec.pump()  # a pump came: the thread hands the socket over after a message
            send(s, [P.encode_hello(1, 0, 1, [U])])
            assert rec.pump(20.0)  # handed over (the lock is free): the thread naps
    finally:
        rec.stop()
    assert rec._thread is not None and not rec._thread.is_alive()
    assert tel(rec, "messages") == 1


@pytest.mark.timeout(30)
def test_a_pump_never_blocks_on_a_full_buffer_and_keeps_order() -> None:
    buf = FIFOBuffer(8)
    # (the thread steps in after an hour without a pump: a stall of this thread between
    # two pumps on a loaded machine cannot hand the socket back to it)
    tuning = ReceiverTuning(takeover=LONG_WAIT)
    with running(buf, tuning=tuning) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", UNTIL_TEST_TIMEOUT)
        # served: the thread has left, and stays idle from now on
        wait_until(rec.pump, "the condition", UNTIL_TEST_TIMEOUT)
        send(s, batch(1, list(range(40)), U))
        got: list[int] = []
        while len(got) < 40:
            # returns: does not wait for room, which nobody makes while it waits (a pump
            # that waited would never return: the timeout marker ends the test)
            rec.pump()
            got += [int(x["time_step"]) for x in buf.get_batch(8, timeout=0.05)] if len(buf) else []
        assert got == list(range(40))
        assert tel(rec, "samples_put") == 40 and tel(rec, "duplicates") == 0


@pytest.mark.timeout(30)
def test_a_reader_waiting_for_data_ingests_it_itself() -> None:
    """The dataset waits in short slices and pumps between them: what arrives while the
    training thread waits is ingested by that thread at once, not after `takeover`."""
    from melissa_trainer.core.dataset import StreamDataset
    from melissa_trainer.stream.stream_source import StreamSource

    buf = ThreadRecordingFIFO(100)
    # the receiver thread would wait 30 s to step in
    source = StreamSource(tuning=ReceiverTuning(takeover=30.0))
    source.start(buf, 0, 1)
    try:
        assert source.endpoint is not None
        dataset = StreamDataset(buf, 4, source=source)
        with pushes(source.endpoint) as (s,):
            send(s, [P.encode_hello(1, 0, 1, [U])])
            receiver = source.receiver
            assert receiver is not None
            # pumps until one serves: the thread has seen them and stays idle from now
            # on (after a fixed sleep it could still hold the socket on a loaded machine)
            wait_until(receiver.pump, "the condition", UNTIL_TEST_TIMEOUT)
            sender = threading.Timer(
                0.3, lambda: send(s, batch(1, [0, 1, 2, 3], U))
            )  # arrives while prefetch waits
            sender.start()
            assert dataset.prefetch(1) == 1  # (the thread would wait 30 s: the timeout)
            sender.join()
        assert buf.threads == [threading.current_thread().name] * 4
    finally:
        source.stop()


@pytest.mark.timeout(30)
def test_a_waiting_pump_ingests_a_message_as_it_arrives() -> None:
    """`pump(wait)` waits on the socket, not the buffer: a message that arrives while
    it waits is ingested by the caller before the call returns, and it returns then."""
    buf = ThreadRecordingFIFO(100)
    with running(buf, tuning=ReceiverTuning(takeover=30.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", UNTIL_TEST_TIMEOUT)
        # pumps until one serves (False while the thread, serving, holds the socket): the
        # thread has seen them and stays idle from now on (a fixed sleep could end first)
        wait_until(rec.pump, "the condition", UNTIL_TEST_TIMEOUT)
        assert rec.pump(0.05) is True and len(buf) == 0  # nothing came: waited, returned
        sender = threading.Timer(0.3, lambda: send(s, batch(1, [0, 1, 2], U)))
        sender.start()
        # it returns on the message, not at the end of its wait: an hour, far beyond this
        # test's timeout (a pump that waited it out fails by the timeout marker)
        assert rec.pump(LONG_WAIT) is True
        sender.join()
        assert len(buf) == 3  # ingested within the call, by this thread
        assert buf.threads == [threading.current_thread().name] * 3
    assert rec.pump(1.0) is False  # stopped: nothing to serve


@pytest.mark.timeout(30)
def test_a_waiting_pump_polls_once_to_wait_and_once_to_find_the_socket_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pump that may wait asks the socket once, waiting (a message that waits already
    answers at once), and once more after what it ingested: no empty poll before the
    wait (it cost a `zmq_poll` and an idle tick per message where the reader waits for
    each). A wait that ends empty still tells the idle clock."""
    buf = ThreadRecordingFIFO(100)
    with running(buf, tuning=ReceiverTuning(takeover=30.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", UNTIL_TEST_TIMEOUT)
        wait_until(
            rec.pump, "the condition", UNTIL_TEST_TIMEOUT
        )  # the thread stays idle from now on (see above)
        timeouts: list[int] = []
        real = zmq.zmq_poll

        def counting(items: Any, timeout: int = -1) -> Any:
            timeouts.append(timeout)
            return real(items, timeout)

        monkeypatch.setattr(zmq, "zmq_poll", counting)
        sender = threading.Timer(0.3, lambda: send(s, batch(1, [0, 1, 2], U)))
        sender.start()
        assert rec.pump(20.0) is True
        sender.join()
        assert len(buf) == 3
        assert timeouts == [20_000, 0]  # the wait (the message came), then empty
        timeouts.clear()
        assert rec.pump(0.05) is True and rec.pump(0.05) is True  # nothing comes
        assert timeouts == [50, 50]
        # both empty waits reached the idle clock (a lower bound on the pump's own 50 ms
        # waits, which the idle clock times itself: deterministic under load)
        assert rec.idle_seconds() >= 0.04


@pytest.mark.timeout(30)
def test_a_waiting_pump_takes_the_socket_over_from_the_serving_thread() -> None:
    """Nobody pumped for long: the thread holds the socket. A pump that may wait waits
    for the thread to hand it over (within `poll_interval`), then serves (it returned
    False at once before, and the reader had to wait on the buffer)."""
    buf = ThreadRecordingFIFO(100)
    with running(buf, tuning=ReceiverTuning(takeover=30.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(
            lambda: tel(rec, "messages") == 1, "the condition", UNTIL_TEST_TIMEOUT
        )  # the thread serves
        # handed over, not timed out: a pump that waited out its wait (an hour, far beyond
        # this test's timeout) fails by the timeout marker
        assert rec.pump(LONG_WAIT) is True
        # the pump holds the socket now (it returned True): the thread, which serves only
        # `takeover` (30 s) after the last pump, cannot take the next message
        send(s, batch(1, [0, 1], U))
        wait_until(lambda: rec.pump() and len(buf) == 2, "the condition", UNTIL_TEST_TIMEOUT)
        assert buf.threads == [threading.current_thread().name] * 2


@pytest.mark.timeout(30)
def test_wait_for_ingests_until_the_buffer_holds_n_samples() -> None:
    """`StreamSource.wait_for(n, t)` goes on ingesting what arrives until the buffer
    can serve `n` (not only the first message), and says when the receiver failed."""
    from melissa_trainer.stream.stream_source import StreamSource

    buf = ThreadRecordingFIFO(100)
    source = StreamSource(tuning=ReceiverTuning(takeover=30.0))
    source.start(buf, 0, 1)
    try:
        assert source.endpoint is not None
        with pushes(source.endpoint) as (s,):
            send(s, [P.encode_hello(1, 0, 1, [U])])
            source.wait_for(4, 1.0)  # the HELLO: no sample, waits out its timeout
            assert len(buf) == 0
            senders = [
                threading.Timer(delay, lambda t=t: send(s, batch(1, [2 * t, 2 * t + 1], U)))
                for t, delay in enumerate((0.2, 0.5))
            ]
            for sender in senders:
                sender.start()
            # (returns once the buffer serves 4: a wait_for that waited out its timeout, an
            # hour, fails by the test's timeout marker; one that returned on the first
            # message holds 2)
            source.wait_for(4, LONG_WAIT)
            assert len(buf) == 4
            for sender in senders:
                sender.join()
        assert buf.threads == [threading.current_thread().name] * 4
        source.receiver._error = RuntimeError("boom")  # type: ignore[union-attr]
        with pytest.raises(SourceError, match="boom"):
            source.wait_for(4, 0.0)
    finally:
        source.stop()
