"""A restart is not a twin (trial htrial10 F1): an ``mpiexec -n 2`` solver restarted after
rank 1's ``exit(1)`` had its new rank 1's HELLO read while the dead rank 1's connection
still counted as open (its close not read yet, under load), and rank 0's receiver warned
of singletons. A second HELLO while the first connection is open is now a suspect: its
first connection closing without a BYE makes it a restart (nothing said), the first saying
BYE or staying open past the grace makes it a twin (warned of, as before)."""

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
from melissa_trainer.stream import liveness, twin_hellos
from melissa_trainer.stream.twin_hellos import TwinHellos
from melissa_trainer.wire import Bye, Hello

U = R.Field("u", "<f4", (4,))


class Events:
    """The watch's word (`owner_of`) and a clock, set by hand: the order of events."""

    def __init__(self) -> None:
        self.open: dict[int, tuple[int, int]] = {}
        self.now = 100.0

    def owner_of(self, fd: int) -> tuple[int, int] | None:
        return self.open.get(fd)


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def hello_of(fd: int, ev: Events, twins: TwinHellos, rank: int = 1) -> bool:
    ev.open[fd] = (4, rank)  # (the watch registers the HELLO first)
    return twins.hello(fd, Hello(4, rank, 2, ()), ev.owner_of)


@pytest.fixture
def ev(caplog: pytest.LogCaptureFixture) -> Events:
    caplog.set_level(logging.DEBUG, "melissa_trainer.stream.receiver")
    return Events()


def test_a_restart_whose_old_connection_is_still_open_is_not_warned_of(
    ev: Events, caplog: pytest.LogCaptureFixture
) -> None:
    twins = TwinHellos(0)  # (the real clock: no grace passes in this test)
    hello_of(5, ev, twins)  # attempt 0's rank 1; it died (exit 1), the launcher restarted it
    assert hello_of(6, ev, twins)  # attempt 1's rank 1, attempt 0's close not read yet
    assert not said(caplog)  # (before the fix: the singletons WARNING, here)
    del ev.open[5]  # the close is read
    twins.settle(ev.owner_of, lambda: False)  # socket not empty: a BYE may still wait
    assert twins.pending
    twins.settle(ev.owner_of, lambda: True)
    assert not twins.pending and not said(caplog) and twins.summary() is None
    assert any("a restarted attempt, not a twin" in r.getMessage() for r in caplog.records)
    # the restart's connection is now the one compared with (its HELLO said again: a rerun)
    assert not hello_of(6, ev, twins)
    assert not said(caplog)


def test_a_twin_whose_first_connection_says_bye_is_warned_of(
    ev: Events, caplog: pytest.LogCaptureFixture
) -> None:
    twins = TwinHellos(0, clock=lambda: ev.now)
    hello_of(5, ev, twins, rank=0)
    assert hello_of(6, ev, twins, rank=0)  # two runs of a 2-rank solver: each rank 0 of 2
    twins.bye(6, Bye(4, 0, 2, 40))  # the second's BYE proves nothing about the first
    assert not said(caplog)
    twins.bye(5, Bye(4, 0, 2, 40))  # the first was alive: a twin (within the grace)
    (warning,) = said(caplog)
    assert warning.startswith("simulation 4: a second connection said HELLO as client rank 0")
    assert "Both say rank 0 of 2: not singletons" in warning  # (`twin_causes`)
    summary = twins.summary()
    assert summary is not None and "1 simulation (4)" in summary


def test_a_twin_open_past_the_grace_is_warned_of_and_its_close_then_changes_nothing(
    ev: Events, caplog: pytest.LogCaptureFixture
) -> None:
    twins = TwinHellos(0, clock=lambda: ev.now)
    hello_of(5, ev, twins)
    assert hello_of(6, ev, twins)
    ev.now += twin_hellos.GRACE_SECONDS - 0.5
    twins.settle(ev.owner_of, lambda: True)
    assert not said(caplog) and twins.pending  # within the grace: not judged
    ev.now += 1.0
    twins.settle(ev.owner_of, lambda: False)  # (a close may wait behind queued data)
    assert not said(caplog) and twins.pending
    twins.settle(ev.owner_of, lambda: True)
    (warning,) = said(caplog)
    assert "client rank 1 of 2" in warning and not twins.pending
    del ev.open[5]  # (both crash later: still a twin, said once)
    twins.settle(ev.owner_of, lambda: True)
    assert len(said(caplog)) == 1 and twins.simulations == {4: (1, 2)}


def test_a_first_connection_of_a_vanished_node_is_not_a_twin_within_the_keepalive(
    ev: Events, caplog: pytest.LogCaptureFixture
) -> None:
    """A node that vanished leaves its connection open (no FIN ever comes) until the
    receiver's TCP keepalive closes it, up to 120 s later; its simulation's restart on
    another node said HELLO meanwhile (a two-node Slurm trial, tests/launcher/backends/
    test_slurm_two_nodes.py): a restart, not MPI singletons. Before, the 10 s grace
    called it a twin. From one host, the grace stays 10 s (a dead process's kernel
    closes its connection: `test_a_twin_open_past_the_grace_...`)."""
    twins = TwinHellos(0, clock=lambda: ev.now)
    ev.open[5] = ev.open[6] = (4, 1)
    twins.hello(5, Hello(4, 1, 2, ()), ev.owner_of, peer="10.0.0.2")  # on the lost node
    assert twins.hello(6, Hello(4, 1, 2, ()), ev.owner_of, peer="10.0.0.1")  # its restart
    horizon = liveness.KEEPALIVE_IDLE + liveness.KEEPALIVE_COUNT * liveness.KEEPALIVE_INTERVAL
    assert horizon < twin_hellos.OTHER_HOST_GRACE_SECONDS
    ev.now += horizon - 1.0  # (the keepalive's last probe unanswered: closed now)
    twins.settle(ev.owner_of, lambda: True)
    assert not said(caplog) and twins.pending
    del ev.open[5]
    twins.settle(ev.owner_of, lambda: True)
    assert not said(caplog) and not twins.pending and twins.summary() is None


def test_twins_on_two_hosts_still_open_past_the_keepalive_are_warned_of(
    ev: Events, caplog: pytest.LogCaptureFixture
) -> None:
    twins = TwinHellos(0, clock=lambda: ev.now)
    ev.open[5] = ev.open[6] = (4, 0)
    twins.hello(5, Hello(4, 0, 1, ()), ev.owner_of, peer="10.0.0.2")
    assert twins.hello(6, Hello(4, 0, 1, ()), ev.owner_of, peer="10.0.0.3")
    ev.now += twin_hellos.OTHER_HOST_GRACE_SECONDS
    twins.settle(ev.owner_of, lambda: True)  # (a live host: its kernel answers the probes)
    (warning,) = said(caplog)
    assert "the first from 10.0.0.2, descriptor 5; the second from 10.0.0.3" in warning


# -- real sockets: the trial's order of events ---------------------------------------------


def hello(sid: int) -> bytes:
    return R.encode_hello(sid, 1, 2, R.hello_body([U], {}))  # rank 1 of 2


def data(sid: int, t: int) -> bytes:
    values = np.full(4, t, np.float32).tobytes()
    return R.part_header(R.DATA, sid, t, 1, 2, U, 0, U.size, True) + values


class Closed(logging.Handler):
    """Sets `restart` at the twin module's DEBUG line about a restart."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.restart = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "a restarted attempt, not a twin" in record.getMessage():
            self.restart.set()


@pytest.mark.timeout(60)
def test_a_restart_read_before_its_predecessors_close_with_real_sockets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "melissa_trainer.stream.receiver")
    handler = Closed()
    logging.getLogger("melissa_trainer.stream.receiver").addHandler(handler)
    buffer = FIFOBuffer(100)
    ctx = zmq.Context()
    old, new = ctx.socket(zmq.PUSH), ctx.socket(zmq.PUSH)
    rank0 = ctx.socket(zmq.PUSH)  # (rank 0 of the simulation, alive through both attempts)
    try:
        with running(buffer, expected_simulations=1) as rec:
            rank0.connect(rec.endpoint)
            rank0.send(R.encode_hello(7, 0, 2, R.hello_body([U], {})))
            old.connect(rec.endpoint)
            old.send(hello(7))
            old.send(data(7, 0))
            _wait(lambda: rec.telemetry()["messages"] >= 3, "attempt 0 was not read")
            new.connect(rec.endpoint)  # attempt 1 says HELLO, attempt 0's still open
            new.send(hello(7))
            new.send(data(7, 1))  # (once it is received, the HELLO before it was handled)
            _wait(lambda: rec.telemetry()["messages"] >= 5, "attempt 1's HELLO was not read")
            old.close(linger=0)  # now attempt 0's close: without its BYE
            assert handler.restart.wait(30), "the suspect was not judged a restart"
            new.send(data(7, 2))
            for t in range(3):  # (rank 0 of the simulation, alive throughout)
                rank0.send(R.part_header(R.DATA, 7, t, 0, 2, U, 0, U.size, True) + bytes(16))
            rank0.send(R.encode_bye(7, 0, 2, 3))
            new.send(R.encode_bye(7, 1, 2, 3))
            samples = drain(buffer)
    finally:
        logging.getLogger("melissa_trainer.stream.receiver").removeHandler(handler)
        for sock in (old, new, rank0):
            sock.close(linger=0)
        ctx.term()
    assert sorted(int(s["time_step"]) for s in samples) == [0, 1, 2]
    assert not [m for m in said(caplog) if "HELLO as client rank" in m]
    assert not [r for r in caplog.records if "had two open connections" in r.getMessage()]


def _wait(condition, what: str, timeout: float = 30.0) -> None:
    """Polls `condition` (telemetry has no event to wait on)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)
