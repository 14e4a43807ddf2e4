"""Trial htrial10 F7: the paragraph about a connection closed before its BYE (with every
cause, the 1 GiB message bound among them) was logged in full after every crash of a
study; it is now said in full once per receiver, the others in one short line each and
their number at the end. And what a receiver has of a simulation whose BYE never came
said "has 40 of ? steps": the "?" is now said in words."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
import reference_protocol as R
import zmq

from melissa_trainer.stream import connections
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.watchdog import IdleClock, StallError
from melissa_trainer.wire import Data, FieldSpec, Hello

U = R.Field("u", "<f4", (4,))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("label", ["", " (receiver of rank 1)"])
def test_the_causes_are_said_in_full_once_then_one_line_each_and_counted(
    caplog: pytest.LogCaptureFixture, label: str
) -> None:
    """The count at the end is a WARNING, as the paragraph that promised it (at INFO,
    default logging hid it); under several ranks (`label`, the receiver's) each line
    names the rank whose receiver says it (a trial read one paragraph twice, unnamed)."""
    caplog.set_level(logging.INFO, "melissa_trainer.stream.receiver")
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.rcvtimeo = 30_000
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    lost: list[int] = []
    watch = connections.ConnectionWatch(sock, 1 << 16, lambda: lost.append(1), label=label)
    pushes = [ctx.socket(zmq.PUSH) for _ in range(3)]
    try:
        for n, (sid, push) in enumerate(zip((8, 9, 10), pushes, strict=True), 1):
            push.connect(f"tcp://127.0.0.1:{port}")
            push.send(R.encode_hello(sid, 0, 1, R.hello_body([U], {})))
            frame = sock.recv(copy=False)
            msg = DataDecoder(1 << 16)(frame.bytes)
            assert isinstance(msg, Hello)
            watch.hello(frame, msg)
            push.close(linger=-1)  # the process ends without its BYE
            deadline = time.monotonic() + 30
            while len(lost) < n:  # (its close reaches the monitor in ZeroMQ's own time)
                assert time.monotonic() < deadline, f"simulation {sid}'s close was not seen"
                watch.settle(lambda: not sock.poll(0))
                time.sleep(0.01)
        watch.close(lambda: not sock.poll(0))
    finally:
        for push in pushes:
            push.close(linger=0)
        sock.close(linger=0)
        ctx.term()
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 4, warned
    # The causes, short: how the process ended is not known when the close is judged (the
    # launcher reads the exit later and names it, exit code or signal, in its own line);
    # a user trial read the paragraph of every cause above that line (hexit item 2).
    assert warned[0] == (
        "simulation 8 client rank 0: its connection closed before its BYE: its process "
        "ended without one (killed, crashed, or exited: a launcher logs how, exit code or "
        "signal), its client was left by an exception, or it sent a message over 65536 "
        "bytes (max_message_bytes + header), dropped by ZeroMQ with its connection. The "
        "steps received before the close are kept for training; the rest of its run is "
        "missing unless the simulation runs again (a launcher restarts it up to "
        "max_restarts times; Slurm runs a job it requeued again, no restart counted; "
        "either rerun skips the steps the receivers hold; a solver you started: run it "
        "again with the same simulation id). Said in full once; the others in one line "
        f"each, counted at the end{label}"
    ), warned[0]
    for sid, line in zip((9, 10), warned[1:3], strict=True):
        assert line == (
            f"simulation {sid} client rank 0: a connection closed before its BYE: the steps "
            f"received before it kept for training, the rest of its run missing unless it runs "
            f"again (as above){label}"
        )
    # (no fate given to `close`: nothing known of them since)
    assert warned[3] == (
        f"3 simulations warned of: a connection closed before its BYE, the steps received "
        f"before it kept for training; the rest of their runs missing unless they run "
        f"again{label}"
    ), warned


def ingest(expected: int | None) -> Ingest:
    return Ingest(
        0,
        1,
        put=lambda s: True,
        end=lambda why: None,
        expected=expected,
        max_field_bytes=1 << 20,
        max_pending=16,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 10,
        recent_size=16,
    )


def test_a_simulation_without_its_bye_has_an_unannounced_number_of_steps() -> None:
    ing = ingest(None)
    u = FieldSpec("u", np.dtype("<f4"), (4,))
    ing.hello(Hello(4, 0, 2, (u,)))
    for t in range(3):
        values = np.full(2, t, np.float32)
        ing.data(Data(4, t, 0, 2, "u", u.dtype, u.shape, 0, 2, values.data), inline=True)
        ing.data(Data(4, t, 1, 2, "u", u.dtype, u.shape, 2, 2, values.data), inline=True)
    said = ing.describe(4)
    assert said == (
        "rank 0's receiver has 3 of an unannounced number of steps, BYE from 0 of 2 client ranks"
    )
    with pytest.raises(StallError) as info:
        IdleClock(2.0).check(3.0, ing)
    assert "0 of an unset number of expected simulations finished" in str(info.value)
    assert "?" not in str(info.value)
