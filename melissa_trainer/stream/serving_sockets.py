"""The sockets of a `PredictServer` (`serving`): its ROUTER, bound where the clients
connect, and the inproc PULL/PUSH pair through which the threads that answer hand their
replies to the I/O thread (ZeroMQ sockets belong to one thread), in a context of their
own.

Contract: `ServingSockets.open` returns them bound (the ROUTER's messages bounded by
`max_bytes`, its replies to a peer that reads none dropped past 1,000, its last replies
lingering up to `LINGER_MS` at `close`; CURVE when keys are given), with the endpoint the
clients are told (`receiver_address.advertised`), or raises OSError (its errno, a message
naming the endpoint and the fix: `serving_bind.bind_error`) with nothing left open.
`reply` sends a reply from any thread (the I/O thread's on the ROUTER, the others'
through the PUSH, under a lock); `close` closes them all and ends the context;
idempotent. Standard library and pyzmq
only.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import zmq

from melissa_trainer.stream.receiver_address import advertised
from melissa_trainer.stream.serving_bind import bind_error

__all__ = ["LINGER_MS", "ServingSockets"]

LINGER_MS = 1000  # the longest `close` waits to deliver the last answers
_ids = itertools.count()


@dataclass
class ServingSockets:
    """A serving rank's sockets (module docstring); None once closed."""

    context: zmq.Context | None
    router: zmq.Socket | None  # the clients' requests in, the replies out
    replies_in: zmq.Socket | None  # the I/O thread's end of the answers handed over
    replies_out: zmq.Socket | None  # the answering threads' end (shared: a lock)
    endpoint: str
    #: the PUSH socket is shared by the threads that answer
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(
        cls,
        bind: str,
        rank: int,
        max_bytes: int,
        curve: tuple[bytes, bytes] | None,
        advertise_host: str | None,
    ) -> ServingSockets:
        """The sockets, bound at `bind` (rank `rank`'s: its words), or OSError."""
        ctx = zmq.Context()
        router = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.MAXMSGSIZE, max_bytes)
        router.setsockopt(zmq.LINGER, LINGER_MS)  # (the last refusals leave on `stop`)
        router.setsockopt(zmq.SNDHWM, 1000)  # replies to a peer that reads none: dropped
        if curve is not None:
            router.curve_server = True
            router.curve_secretkey, router.curve_publickey = curve
        inproc = f"inproc://melissa-serving-{next(_ids)}"
        replies_in = ctx.socket(zmq.PULL)
        replies_in.bind(inproc)
        replies_out = ctx.socket(zmq.PUSH)
        replies_out.setsockopt(zmq.LINGER, 0)
        replies_out.setsockopt(zmq.SNDHWM, 0)  # answers: at most max_queue per drain
        replies_out.connect(inproc)
        sockets = cls(ctx, router, replies_in, replies_out, "")
        try:
            try:
                router.bind(bind)
            except zmq.ZMQError as exc:
                raise OSError(exc.errno, bind_error(bind, rank, exc)) from exc
            last = router.getsockopt_string(zmq.LAST_ENDPOINT)
            sockets.endpoint = advertised(last, advertise_host)
        except BaseException:
            sockets.close()
            raise
        return sockets

    def reply(self, identity: bytes | None, frames: list[Any], io_thread: bool) -> None:
        """Send `frames` to the peer `identity`, copied (`serving_bind` says why): on
        the ROUTER from the I/O thread (`io_thread`), which owns it; from another
        thread, handed to the I/O thread through the PUSH. Nothing once closed."""
        message = [identity or b"", *frames]
        if io_thread:
            assert self.router is not None
            self.router.send_multipart(message, copy=True)
            return
        with self.lock:
            out = self.replies_out
            if out is not None:
                out.send_multipart(message, copy=True)

    def close(self) -> None:
        """Close the sockets (the ROUTER lingering up to `LINGER_MS`: to a peer gone,
        dropped at once) and end the context. Idempotent."""
        if self.router is not None:
            self.router.close(linger=LINGER_MS)
        for sock in (self.replies_in, self.replies_out):
            if sock is not None:
                sock.close(linger=0)
        self.router = self.replies_in = self.replies_out = None
        if self.context is not None:
            self.context.term()
            self.context = None
