"""A process that receives and discards ZeroMQ messages, for the benchmarks that time a
client's sends (client_send.py, client_finite_check.py): it binds a PULL socket to a
random loopback port, and stops at a message whose first frame starts with ``STOP``.

    with discard_sink() as endpoint:   # "tcp://127.0.0.1:PORT"
        ...                            # clients send to endpoint

On a normal exit the sink is told to stop and waited for (30 s); on any exit one still
running is killed, so that no benchmark leaves it behind.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import zmq

__all__ = ["discard_sink"]

_SINK = r"""
import sys, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.PULL)
if len(sys.argv) > 1:
    s.setsockopt(zmq.RCVHWM, int(sys.argv[1]))
port = s.bind_to_random_port("tcp://127.0.0.1")
print(port, flush=True)
while True:
    frames = s.recv_multipart(copy=False)
    if frames[0].bytes[:4] == b"STOP":
        break
"""


@contextmanager
def discard_sink(rcvhwm: int | None = None) -> Iterator[str]:
    """The endpoint of a discarding sink process (its receive high-water mark `rcvhwm`,
    ZeroMQ's default when None), stopped and reaped on leaving."""
    argv = [sys.executable, "-c", _SINK] + ([] if rcvhwm is None else [str(rcvhwm)])
    sink = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        endpoint = f"tcp://127.0.0.1:{int(sink.stdout.readline())}"
        yield endpoint
        ctx = zmq.Context()
        stop = ctx.socket(zmq.PUSH)
        stop.connect(endpoint)
        stop.send(b"STOP")
        stop.close(linger=5000)
        ctx.term()
        sink.wait(30)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
