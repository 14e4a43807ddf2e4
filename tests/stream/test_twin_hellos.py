"""Two open connections saying HELLO as the same simulation and client rank (trial F1:
an MPI solver under Slurm without ``srun --mpi=pmi2`` runs as singletons, each rank 0 of
1; the study "succeeded" with every step received twice, counted as duplicates at INFO,
and no warning). Now one WARNING per study naming the likely cause and the fix, and one
line at the end of the stream listing the simulations alike. Not a twin: a restarted
attempt (its predecessor's connection closed first) or a HELLO said again on the same
connection (a worker's rerun)."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
import reference_protocol as R
import zmq
from helpers import drain, running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import twin_hellos

U = R.Field("u", "<f4", (4,))


def hello(sid: int) -> bytes:
    return R.encode_hello(sid, 0, 1, R.hello_body([U], {}))  # rank 0 of 1: a singleton's


def data(sid: int, t: int) -> bytes:
    values = np.full(4, t, np.float32).tobytes()
    return R.part_header(R.DATA, sid, t, 0, 1, U, 0, U.size, True) + values


class Lines(logging.Handler):
    """The receiver's messages at INFO and above; `closed` set at the watch's line about
    a closed connection (DEBUG)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.closed = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "connection closed" in record.getMessage():
            self.closed.set()
        if record.levelno >= logging.INFO:
            self.records.append(record)

    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= logging.WARNING]

    def infos(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == logging.INFO]


@pytest.fixture
def lines():
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    handler, level = Lines(), receiver_log.level
    receiver_log.addHandler(handler)
    receiver_log.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        receiver_log.removeHandler(handler)
        receiver_log.setLevel(level)


def wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.timeout(60)
def test_singletons_of_two_simulations_are_warned_of_once_and_listed(lines: Lines) -> None:
    buffer = FIFOBuffer(100)
    ctx = zmq.Context()
    socks = [ctx.socket(zmq.PUSH) for _ in range(4)]  # two singletons per simulation
    try:
        with running(buffer, expected_simulations=2) as rec:
            for i, sock in enumerate(socks):
                sock.connect(rec.endpoint)
                sid = 3 + i // 2
                sock.send(hello(sid))
                sock.send(data(sid, 0))
                # each HELLO read before the next connection's (its step counted): the
                # first of a simulation is then open when its twin's HELLO is read
                want = i + 1
                wait_for(
                    lambda want=want: (
                        rec.telemetry()["samples_put"] + rec.telemetry()["duplicates"] >= want
                    ),
                    f"connection {i}'s step was not read",
                )
            # every singleton sends all; the first of each says BYE (it streamed alongside
            # its twin: judged so at once), not the other (its BYE, read first, could end
            # the stream before the first's is read and the twin judged)
            for i, sock in enumerate(socks):
                sid = 3 + i // 2
                for t in range(1, 4):
                    sock.send(data(sid, t))
                if i % 2 == 0:
                    sock.send(R.encode_bye(sid, 0, 1, 4))
            samples = drain(buffer)
            telemetry = rec.telemetry()
    finally:
        for sock in socks:
            sock.close(linger=0)
        ctx.term()
    keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == [(s, t) for s in (3, 4) for t in range(4)]  # exactly once, as before
    assert telemetry["duplicates"] >= 2
    twins = [w for w in lines.warnings() if "said HELLO as client rank" in w]
    assert len(twins) == 1, lines.warnings()  # once per study, not per simulation
    assert twins[0].startswith("simulation 3: a second connection said HELLO as client rank 0")
    assert "singletons" in twins[0] and "--mpi=pmi2" in twins[0]
    assert 'srun_args=["--mpi=pmi2"]' in twins[0] and "mpiexec from another MPI" in twins[0]
    # (at WARNING on rank 0, as the warning that promised it: default logging hid an INFO)
    listed = [w for w in lines.warnings() if "had two open connections" in w]
    assert listed == [
        "receiver of rank 0: 2 simulations (3, 4) had two open connections saying HELLO as "
        "the same client rank (see the warning above for the likely cause)"
    ]


@pytest.mark.timeout(60)
def test_a_restarted_attempt_and_a_hello_said_again_are_not_twins(lines: Lines) -> None:
    buffer = FIFOBuffer(100)
    ctx = zmq.Context()
    first, again = ctx.socket(zmq.PUSH), ctx.socket(zmq.PUSH)
    try:
        with running(buffer, expected_simulations=1) as rec:
            first.connect(rec.endpoint)
            for frame in [hello(5), data(5, 0), hello(5), data(5, 1)]:  # (a worker's rerun)
                first.send(frame)
            wait_for(lambda: rec.telemetry()["samples_put"] == 2, "steps 0, 1 were not put")
            first.close(linger=0)  # the attempt dies, without its BYE
            assert lines.closed.wait(30), "the close was not seen"
            again.connect(rec.endpoint)  # the next attempt
            for frame in [hello(5), *(data(5, t) for t in range(4)), R.encode_bye(5, 0, 1, 4)]:
                again.send(frame)
            samples = drain(buffer)
    finally:
        first.close(linger=0)
        again.close(linger=0)
        ctx.term()
    assert sorted(int(s["time_step"]) for s in samples) == [0, 1, 2, 3]
    assert not [m for m in lines.warnings() + lines.infos() if "HELLO as" in m]
    assert not [m for m in lines.infos() if "had two open connections" in m]


@pytest.mark.timeout(60)
def test_a_twin_whose_second_bye_ends_the_stream_is_listed(lines: Lines) -> None:
    """Two plain clients per simulation (srun without --mpi): the last simulation's second
    connection says BYE first, which ends the stream, and its first connection's BYE is
    read after the end. Before, the end's list was said at the end, naming simulation 3
    alone (1 of 2 doubled simulations); now it waits for that BYE."""
    buffer = FIFOBuffer(100)
    ctx = zmq.Context()
    socks = [ctx.socket(zmq.PUSH) for _ in range(4)]  # socks[2 s + k]: simulation 3 + s's k-th
    try:
        with running(buffer, expected_simulations=2) as rec:
            for i, sock in enumerate(socks):
                sock.connect(rec.endpoint)
                sid = 3 + i // 2
                sock.send(hello(sid))
                sock.send(data(sid, 0))
                want = i + 1  # (each HELLO read before the next: the first is open)
                wait_for(
                    lambda want=want: (
                        rec.telemetry()["samples_put"] + rec.telemetry()["duplicates"] >= want
                    ),
                    f"connection {i}'s step was not read",
                )
            for i in (0, 1):  # simulation 3: both stream, its first says BYE (judged at once)
                for t in range(1, 4):
                    socks[i].send(data(3, t))
            socks[0].send(R.encode_bye(3, 0, 1, 4))
            for t in range(1, 4):  # simulation 4: its second connection ends the stream
                socks[3].send(data(4, t))
            socks[3].send(R.encode_bye(4, 0, 1, 4))
            drain(buffer)
            wait_for(lambda: rec.ended, "the stream did not end")
            for t in range(1, 4):  # then its first connection's steps and BYE, after the end
                socks[2].send(data(4, t))
            socks[2].send(R.encode_bye(4, 0, 1, 4))
            wait_for(
                lambda: any("had two open connections" in w for w in lines.warnings()),
                "no list of twins",
            )
    finally:
        for sock in socks:
            sock.close(linger=0)
        ctx.term()
    listed = [w for w in lines.warnings() if "had two open connections" in w]
    assert len(listed) == 1, lines.warnings()
    assert listed[0].startswith("receiver of rank 0: 2 simulations (3, 4) had two"), listed


@pytest.mark.timeout(60)
def test_a_suspect_not_judged_when_the_receiver_stops_is_named_as_such(
    lines: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second connection's BYE ends the stream and the receiver stops before anything
    of the first is read (its BYE unread, or a dead attempt's close): the stop's list
    names the simulation as not judged. Before, nothing was said of it."""
    monkeypatch.setattr(twin_hellos, "GRACE_SECONDS", 3600.0)  # (judged by no clock here)
    buffer = FIFOBuffer(100)
    ctx = zmq.Context()
    first, second = ctx.socket(zmq.PUSH), ctx.socket(zmq.PUSH)
    try:
        with running(buffer, expected_simulations=1) as rec:
            for i, sock in enumerate((first, second)):
                sock.connect(rec.endpoint)
                sock.send(hello(4))
                sock.send(data(4, 0))
                want = i + 1  # (each HELLO read before the next: the first is open)
                wait_for(
                    lambda want=want: (
                        rec.telemetry()["samples_put"] + rec.telemetry()["duplicates"] >= want
                    ),
                    f"connection {i}'s step was not read",
                )
            for t in range(1, 4):
                second.send(data(4, t))
            second.send(R.encode_bye(4, 0, 1, 4))
            drain(buffer)
            wait_for(lambda: rec.ended, "the stream did not end")
            assert not [m for m in lines.infos() if "simulation (4)" in m]  # (not yet)
    finally:
        first.close(linger=0)
        second.close(linger=0)
        ctx.term()
    assert not [w for w in lines.warnings() if "HELLO as" in w]  # (no twin judged)
    listed = [m for m in lines.infos() if "not judged when the receiver stopped" in m]
    assert len(listed) == 1, lines.infos()
    assert listed[0].startswith("receiver of rank 0: 1 simulation (4) not judged"), listed
