"""A connection whose close the ingester reads before its HELLO is still counted lost.

tests/trainer/test_rank_figures.py once saw ``source_connections_lost`` 1 where 2 were
due (a client rank without its BYE, at 2 receivers) under load in CI: the client said
HELLO, sent a step and exited while one receiver's ingester was busy, so ZeroMQ emitted
the connection's DISCONNECTED before the ingester read its HELLO. The watch drains the
monitor before it registers a HELLO (so that an earlier connection's close on a reused
descriptor is not taken for the new one's: test_connection_fd_reuse.py), read that close
as one of no owner, then registered the HELLO of a connection that would never close
again: the loss was neither counted nor warned of.

The watch on a real PULL socket, the test playing the ingester: it reads the HELLO's
frame, waits until the receiver's end of the connection is closed (libzmq emits the
DISCONNECTED before it closes the descriptor), and only then registers the HELLO (the
order of the CI run, forced). The oracle: one client rank closed without its BYE, so one
connection lost; a second connection, accepted on a descriptor whose close of no owner
was read before, stays open and uncounted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import reference_protocol as R
import zmq
from waiting import wait_until

from melissa_trainer.stream import connections
from melissa_trainer.stream.data_decoder import DataDecoder

pytestmark = [
    pytest.mark.e2e,  # (a child process: the clients)
    pytest.mark.timeout(60),
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd"),
]

U = R.Field("u", "<f4", (4,))
LIMIT = 1 << 16


# the clients, in a child process (their closes are a process's, as a solver's): one
# line per command on stdin, "ok" on stdout once it is done
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


def link(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def hello(sid: int) -> str:
    return R.encode_hello(sid, 0, 1, R.hello_body([U], {})).hex()


def test_a_close_read_before_its_hello_is_counted() -> None:
    decode, lost = DataDecoder(LIMIT), []
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.rcvtimeo = 30_000
    endpoint = f"tcp://127.0.0.1:{sock.bind_to_random_port('tcp://127.0.0.1')}"
    watch = connections.ConnectionWatch(sock, LIMIT, lambda: lost.append(1))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None

    def say(*lines: str) -> None:
        for line in lines:
            child.stdin.write(line + "\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
            assert child.stdout.readline().strip() == "ok"  # type: ignore[union-attr]

    def read() -> tuple[zmq.Frame, Any]:
        frame = sock.recv(copy=False)
        return frame, decode(frame.bytes)

    def closed_here(frame: zmq.Frame) -> None:
        """Wait until the receiver's end of `frame`'s connection is closed (its
        DISCONNECTED emitted: libzmq emits it before it closes the descriptor)."""
        fd, was = frame.get(zmq.SRCFD), link(frame.get(zmq.SRCFD))
        wait_until(lambda: was is None or link(fd) != was, "the connection's close")

    try:
        # simulation 1 says HELLO and goes without its BYE
        say(f"A connect {endpoint}", f"A send {hello(1)}", "A close")
        frame, msg = read()
        closed_here(frame)  # ... its close emitted before the ingester reads its HELLO
        watch.hello(frame, msg)
        assert watch.owner_of(frame.get(zmq.SRCFD)) is None  # closed: not open
        watch.settle(lambda: not sock.poll(0))
        assert lost == [1]
        # simulation 2 says BYE, its close (of no owner) is read; simulation 3's
        # connection stays open, whatever descriptor it is given: not counted
        say(f"B connect {endpoint}", f"B send {hello(2)}")
        say(f"B send {R.encode_bye(2, 0, 1, 0).hex()}", "B close")
        frame, msg = read()
        watch.hello(frame, msg)
        frame, bye = read()
        watch.bye(frame, bye)
        closed_here(frame)
        watch.settle(lambda: not sock.poll(0))
        say(f"C connect {endpoint}", f"C send {hello(3)}")
        frame, msg = read()
        watch.hello(frame, msg)
        assert watch.owner_of(frame.get(zmq.SRCFD)) == (3, 0)
        watch.settle(lambda: not sock.poll(0))
        assert lost == [1]
    finally:
        watch.close()
        child.stdin.close()
        child.wait(30)
        sock.close(linger=0)
        ctx.term()
