"""The stream receiver under malformed messages (counted by reason, the stream goes on), a
slow consumer (the client blocks, nothing lost), a failure in its thread (surfaced from
`check`), `stop` and `finish`; pending assemblies are bounded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from helpers import drain, running
from receiver_runs import F32, U, check_stream, data, pushes, send, tel, value
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer, Sample
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverTuning


def settled(read: Callable[[], int], quiet: float, timeout: float = 10.0) -> int:
    """`read()` once it has not changed for `quiet` seconds (AssertionError after
    `timeout`)."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, f"still changing after {timeout} s: {value}"
        time.sleep(0.01)
        if (now := read()) != value:
            value, since = now, time.monotonic()
    return value


@pytest.mark.timeout(30)
def test_malformed_messages_are_counted_by_reason_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    v = P.FieldSpec("v", np.dtype("<f8"), (2,))
    buf = FIFOBuffer(100)
    bad: list[tuple[str, list[bytes]]] = [
        ("truncated", [b"MTR"]),
        ("bad_magic", [b"this is no message at all"]),
        ("bad_version", [P.PREFIX.pack(P.MAGIC, 9, P.HELLO, 0, 1) + bytes(8)]),
        ("bad_kind", [P.PREFIX.pack(P.MAGIC, P.VERSION, 7, 0, 1) + bytes(8)]),
        ("missing_frame", data(1, 0, U, value(1, 0, U), inline=False)[:1]),
        ("bad_size", [data(1, 0, U, value(1, 0, U))[0][:-4]]),
        ("bad_dtype", data(1, 0, U, value(1, 0, U), dtype_code=99)),
        ("bad_rank", data(1, 0, U, value(1, 0, U), rank=2, count=2)),
        ("bad_range", [P.encode_data_header(1, 0, 0, 1, b"u", 1, (4, 3), 10, 5, True) + bytes(20)]),
        ("bad_name", data(1, 0, U, value(1, 0, U), name=b"\xff\xfe")),
        ("bad_hello", [P.encode_hello(2, 0, 1, [P.FieldSpec("time_step", F32, (1,))])]),
        ("bad_hello", [P.encode_hello(2, 0, 1, [U])[:-3] + b"}}}"]),
        ("bad_hello", [P.encode_hello(2, 0, 1, [U], {"p": float("nan")})]),
        ("too_large", [P.encode_hello(3, 0, 1, [P.FieldSpec("w", F32, (1 << 20,))])]),
        ("no_hello", data(99, 0, U, value(99, 0, U))),
        ("no_hello", [P.encode_bye(99, 0, 1, 3)]),
        ("hello_mismatch", [P.encode_hello(1, 0, 1, [U, v], {"p": 2.0})]),
        ("bad_field", data(1, 0, v, value(1, 0, v))),
        ("bad_field", [P.encode_data_header(1, 0, 0, 1, b"u", 2, (4, 3), 0, 12, True) + bytes(96)]),
        ("bad_client_count", data(1, 0, U, value(1, 0, U), count=3)),
        ("bad_step", data(1, 5000, U, value(1, 0, U))),
    ]
    with (
        running(buf, expected_simulations=1, max_time_step=1000, max_message_bytes=1 << 20) as rec,
        pushes(rec.endpoint) as (s,),
    ):
        send(s, [P.encode_hello(1, 0, 1, [U], {"p": 1.0})])
        for t in range(3):
            send(s, data(1, t, U, value(1, t, U)))
        for _, frames in bad:
            send(s, frames)
        send(s, data(1, 1, U, value(1, 1, U)))  # a duplicate
        for t in range(3, 6):
            send(s, data(1, t, U, value(1, t, U)))
        send(s, [P.encode_bye(1, 0, 1, 6)])
        samples = drain(buf)
        rec.check()  # alive, no failure
        tel = rec.telemetry()
    expected: dict[str, int] = {}
    for reason, _ in bad:
        expected[reason] = expected.get(reason, 0) + 1
    got = {k[len("rejected_") :]: int(n) for k, n in tel.items() if k.startswith("rejected_") and n}
    assert got == expected
    assert tel["rejected"] == len(bad) and tel["duplicates"] == 1
    check_stream(samples, {1: (range(6), [U], {"p": 1.0})})
    # logged once per (simulation, reason): here each reason comes from one simulation
    logged = [r for r in caplog.records if "dropped a message" in r.getMessage()]
    assert len(logged) == len(expected)


@pytest.mark.timeout(120)  # (300 x 128 KB took 21-35 s on a loaded machine)
def test_slow_consumer_blocks_the_client_without_loss() -> None:
    spec = P.FieldSpec("w", np.dtype("<f8"), (16384,))  # 128 KB, two frames
    steps = 300  # about 39 MB: far more than the buffer, the queues and the kernel hold
    buf = FIFOBuffer(4)
    progress = {"sent": 0}
    with (
        running(buf, expected_simulations=1, rcvhwm=4) as rec,
        pushes(rec.endpoint, sndhwm=2) as (s,),
    ):

        def simulate() -> None:
            send(s, [P.encode_hello(4, 0, 1, [spec])])
            for t in range(steps):
                send(s, data(4, t, spec, value(4, t, spec)))
                progress["sent"] = t + 1
            send(s, [P.encode_bye(4, 0, 1, steps)])

        sim = threading.Thread(target=simulate, daemon=True)
        sim.start()
        wait_until(lambda: len(buf) == 4, "the condition", UNTIL_TEST_TIMEOUT)
        # blocked: no send for 0.5 s while nobody reads (after a fixed sleep, a loaded
        # machine could still be filling the queues, and the count moved under the check)
        blocked_at = settled(lambda: progress["sent"], 0.5)
        assert sim.is_alive() and blocked_at < steps, "the client's sends did not block"
        samples = drain(buf)
        sim.join(10)
        assert progress["sent"] == steps
    check_stream(samples, {4: (range(steps), [spec], {})})


class _FailingBuffer(FIFOBuffer):
    def put(self, sample: Sample, timeout: float | None = None) -> None:
        raise RuntimeError("disk on fire")


@pytest.mark.timeout(30)
def test_a_failure_in_the_thread_surfaces_from_check_and_closes_the_buffer() -> None:
    buf = _FailingBuffer(10)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        send(s, data(1, 0, U, value(1, 0, U)))
        wait_until(lambda: buf.closed, "the condition", UNTIL_TEST_TIMEOUT)
        with pytest.raises(SourceError, match="disk on fire"):
            rec.check()
        assert buf.get_batch(1, timeout=1) == []  # readers wake


@pytest.mark.timeout(30)
def test_stop_while_blocked_in_put_is_prompt_and_releases_the_socket() -> None:
    buf = FIFOBuffer(1)
    # prompt: within put_timeout, not at the end of stop_timeout's join of a thread
    # blocked in put: an hour, far beyond this test's timeout (a stop that waited it out
    # fails by the timeout marker; one that gave up on the join leaves the thread alive)
    rec = Receiver(buf, tuning=ReceiverTuning(put_timeout=0.05, stop_timeout=3600.0))
    rec.start()
    try:
        with pushes(rec.endpoint) as (s,):
            send(s, [P.encode_hello(1, 0, 1, [U])])
            for t in range(3):
                send(s, data(1, t, U, value(1, t, U)))
            wait_until(
                lambda: tel(rec, "messages") >= 3 and len(buf) == 1,
                "the condition",
                UNTIL_TEST_TIMEOUT,
            )
            rec.stop()
            assert rec._thread is not None and not rec._thread.is_alive()
            assert rec._socket is None and rec._context is None
            rec.stop()  # idempotent
    finally:
        rec.stop()


@pytest.mark.timeout(30)
def test_finish_ends_the_stream_when_known_simulations_are_done_or_now() -> None:
    buf = FIFOBuffer(10)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        send(s, data(1, 0, U, value(1, 0, U)))
        rec.finish()
        # two more messages (the same HELLO again: no effect) served after the request:
        # the thread handles a request before each receive, so it has seen this one
        send(s, [P.encode_hello(1, 0, 1, [U])])
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 4, "the condition", UNTIL_TEST_TIMEOUT)
        assert not buf.closed  # simulation 1 has not said BYE
        send(s, [P.encode_bye(1, 0, 1, 1)])
        assert len(drain(buf)) == 1
        assert rec.finished_simulations() == [1]
    buf = FIFOBuffer(10)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", UNTIL_TEST_TIMEOUT)
        rec.finish(wait=False)
        wait_until(lambda: buf.closed, "the condition", UNTIL_TEST_TIMEOUT)


@pytest.mark.timeout(30)
def test_pending_assemblies_are_bounded_and_the_simulation_still_finishes() -> None:
    buf = FIFOBuffer(10)
    with (
        running(buf, expected_simulations=1, max_pending=2) as rec,
        pushes(rec.endpoint, n=2) as socks,
    ):
        for r in (0, 1):
            send(socks[r], [P.encode_hello(1, r, 2, [U])])
        wait_until(lambda: tel(rec, "messages") == 2, "the condition", UNTIL_TEST_TIMEOUT)
        for t in range(3):  # rank 0's halves of three steps: the oldest is dropped
            send(socks[0], data(1, t, U, value(1, t, U), 0, 2, 0, 6))
        wait_until(lambda: tel(rec, "incomplete_dropped") == 1, "the condition", UNTIL_TEST_TIMEOUT)
        for t in (1, 2):
            send(socks[1], data(1, t, U, value(1, t, U), 1, 2, 6, 12))
        for r in (0, 1):
            send(socks[r], [P.encode_bye(1, r, 2, 3)])
        samples = drain(buf)
    check_stream(samples, {1: (range(1, 3), [U], {})})
