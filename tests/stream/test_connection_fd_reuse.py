"""A descriptor reused before the old connection's close was read (a user trial: a false
"closed before its BYE ... that data is lost" WARNING, ``connections_lost`` 1, in 2 of
20 heat studies on a busy machine, every sample received). Simulation A says BYE and
exits; ZeroMQ emits its DISCONNECTED and closes its descriptor; simulation B connects on
that descriptor and says HELLO before A's DISCONNECTED is read. Read after B's HELLO,
A's close was taken for B's: B was judged lost at the next empty socket.

The watch on a real PULL socket, the test playing the ingester (it reads the messages
and calls `hello`, `bye`, `close`); the simulations' sockets in a child process (so that
the receiver's descriptors are the only ones this process opens meanwhile). A reader of
the monitor other than the ingester's thread is held until B's HELLO is registered (the
order of the trial, forced); the descriptor's reuse is checked (``SRCFD``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import reference_protocol as R
import zmq

from melissa_trainer.stream import connections
from melissa_trainer.stream.data_decoder import DataDecoder

U = R.Field("u", "<f4", (4,))
LIMIT = 1 << 16

# the simulations: one line per command on stdin, "ok" on stdout once it is done
CHILD = r"""
import sys, zmq
ctx, socks = zmq.Context(), {}
for line in sys.stdin:
    name, cmd, *arg = line.split()
    if cmd == "connect":
        socks[name] = ctx.socket(zmq.PUSH)
        socks[name].connect(arg[0])
    elif cmd == "send":
        socks[name].send(bytes.fromhex(arg[0]))
    elif cmd == "close":
        socks.pop(name).close(linger=-1)
    print("ok", flush=True)
for s in socks.values():
    s.close(linger=0)
ctx.term()
"""


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def hello(sid: int) -> bytes:
    return R.encode_hello(sid, 0, 1, R.hello_body([U], {}))


def link(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


@pytest.mark.e2e  # (a child process: the simulations)
@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_close_read_after_a_reused_descriptors_hello_is_not_the_new_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingester, release = threading.get_ident(), threading.Event()
    parse = connections.parse_monitor_message

    def held(msg: list[bytes]) -> Any:
        if threading.get_ident() != ingester:  # a reader of its own: held (see above)
            release.wait(30)
        return parse(msg)

    monkeypatch.setattr(connections, "parse_monitor_message", held)
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    warnings = Warnings()
    receiver_log.addHandler(warnings)
    decode, lost = DataDecoder(LIMIT), []
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.rcvtimeo = 30_000
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    endpoint = f"tcp://127.0.0.1:{port}"
    watch = connections.ConnectionWatch(sock, LIMIT, lambda: lost.append(1))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    fillers: list[int] = []

    def say(*lines: str) -> None:
        for line in lines:
            child.stdin.write(line + "\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
            assert child.stdout.readline().strip() == "ok"  # type: ignore[union-attr]

    def read() -> tuple[zmq.Frame, Any]:
        frame = sock.recv(copy=False)
        return frame, decode(frame.bytes)

    try:
        say(
            f"A connect {endpoint}",
            f"A send {hello(1).hex()}",
            f"A send {R.encode_bye(1, 0, 1, 0).hex()}",
            "A close",
        )
        frame, msg = read()
        watch.hello(frame, msg)
        fd, was = frame.get(zmq.SRCFD), link(frame.get(zmq.SRCFD))
        frame, msg = read()
        watch.bye(frame, msg)
        # ZeroMQ closes A's descriptor (after its DISCONNECTED event was emitted), if it
        # has not yet (None: already closed; nothing else in this process opens one)
        deadline = time.monotonic() + 30
        while was is not None and link(fd) == was:
            assert time.monotonic() < deadline, "A's descriptor was never closed"
            time.sleep(0.01)
        # the holes below it filled, so that B's connection is given A's descriptor
        while (filler := os.open(os.devnull, os.O_RDONLY)) < fd:
            fillers.append(filler)
        os.close(filler)
        if filler != fd:
            pytest.skip(f"descriptor {fd} was taken by something else ({filler} given)")
        say(f"B connect {endpoint}", f"B send {hello(2).hex()}")
        frame, msg = read()
        if frame.get(zmq.SRCFD) != fd:
            pytest.skip(f"B was not given A's descriptor {fd} ({frame.get(zmq.SRCFD)})")
        watch.hello(frame, msg)  # (the ingester's registration of B)
        assert watch.owner_of(fd) == (2, 0)
        release.set()
        # B is open, its BYE not sent: nothing to judge (the watch's reading ends first)
        watch.close(lambda: not sock.poll(0))
        assert not lost and not warnings.lines, warnings.lines
    finally:
        release.set()
        watch.close()
        child.stdin.close()
        child.wait(30)
        for filler in fillers:
            os.close(filler)
        sock.close(linger=0)
        ctx.term()
        receiver_log.removeHandler(warnings)


@pytest.mark.timeout(120)
def test_closes_left_unread_never_stall_the_socket() -> None:
    """The ingester reads the monitor only at a HELLO, a BYE or an empty poll: the closes
    of a busy stream wait there. With libzmq's default HWMs, about 2000 of them stalled
    the receiver's socket (no message delivered, nothing read: 1500 passed, 2100 hung,
    libzmq 4.3.5); the monitor's queue is unbounded (RCVHWM 0). 3000 connections, each
    sending one message then closing, none of their closes read until the end."""
    n = 3000
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.rcvtimeo = 30_000
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    watch = connections.ConnectionWatch(sock, LIMIT, lambda: None)
    try:
        for i in range(n):
            push = ctx.socket(zmq.PUSH)
            push.connect(f"tcp://127.0.0.1:{port}")
            push.send(b"%d" % i)
            push.close(linger=-1)
            assert sock.recv() == b"%d" % i  # (zmq.Again after 30 s: the socket stalled)
    finally:
        watch.close()
        sock.close(linger=0)
        ctx.term()
