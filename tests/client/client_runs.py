"""What the client API's tests against real PULL sockets share (test_client_*.py): `Receiver`,
a PULL socket bound on 127.0.0.1 that decodes what it receives with `wire.decode`; a
port with nothing listening, held for the test (`free_port`); a valid field specification
(`GOOD`); the shapes of a one-frame and a two-frame array. The fixtures `zctx` and `receiver` are in
conftest.py.
"""

from __future__ import annotations

import numpy as np
import zmq
from held_ports import held_port

from melissa_trainer import wire as p


class Receiver:
    """A PULL socket bound on 127.0.0.1; `recv` decodes one message (payloads copied)."""

    def __init__(self, ctx: zmq.Context, **options: int) -> None:
        self.sock = ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        for option, value in options.items():
            self.sock.setsockopt(getattr(zmq, option), value)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.frames: list[int] = []  # frames per message received
        self.raw: list[list[bytes]] = []  # the frames' bytes
        self.pending: list[p.Message] = []  # decoded, not returned yet
        self.batches = 0  # BATCH messages received

    def recv(self, timeout: float = 5.0) -> p.Message:
        """The next message. Frames are read as the receiver reads them (only a DATA
        header without INLINE takes the next frame as its payload); a BATCH is returned
        as its records, one DATA per call."""
        if self.pending:
            return self.pending.pop(0)
        if not self.sock.poll(int(timeout * 1000)):
            raise AssertionError(f"nothing received within {timeout} s")
        frames = self.sock.recv_multipart(copy=False)
        self.frames.append(len(frames))
        self.raw.append([f.bytes for f in frames])
        i = 0
        while i < len(frames):
            head = frames[i].bytes
            two = head[5] == p.DATA and not head[6] & p.FLAG_INLINE and i + 1 < len(frames)
            msg = p.decode(frames[i].buffer, frames[i + 1].buffer if two else None)
            i += 2 if two else 1
            if isinstance(msg, p.Batch):
                self.batches += 1
                records = [msg.record(k) for k in range(msg.records)]
                self.pending += [r._replace(payload=r.payload.copy()) for r in records]
            elif isinstance(msg, p.Data):
                payload = np.frombuffer(bytes(msg.payload), msg.dtype)
                self.pending.append(msg._replace(payload=payload))
            else:
                self.pending.append(msg)
        return self.pending.pop(0)

    def recv_data(self, timeout: float = 5.0) -> p.Data:
        msg = self.recv(timeout)
        assert isinstance(msg, p.Data), msg
        return msg

    def until_bye(self, byes: int = 1, timeout: float = 10.0) -> list[p.Message]:
        out: list[p.Message] = []
        while byes:
            out.append(self.recv(timeout))
            byes -= isinstance(out[-1], p.Bye)
        return out

    def assert_silent(self, wait: float = 0.2) -> None:
        assert not self.sock.poll(int(wait * 1000)), "an unexpected message arrived"


def free_port() -> int:
    """A port of 127.0.0.1 where connections are refused until a zmq socket binds it
    (`held_ports.held_port`: held until the test ends). Not one bound and closed: its
    clients connect to it for seconds before the test binds it (or never do), and a
    port merely freed may meanwhile be taken by another test's bind to port 0 (the
    test's bind then fails, or its client talks to that test's socket) or picked as
    the local port of a connect (a client connected to itself)."""
    return held_port()


GOOD = {"u": ((2, 3), "float32")}


TWO_FRAME_SHAPE = (1, 1 << 17)  # 1 MiB: two frames
