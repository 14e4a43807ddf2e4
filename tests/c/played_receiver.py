"""A receiver played by a test: its PULL socket and its follow socket, the frames each
took, and the follow socket's answers chosen by the test (tests/c/test_c_close_follow.py,
tests/c/test_c_rerun_skips.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import zmq

from melissa_trainer import wire as P

__all__ = ["Reply", "played_receiver"]

#: a follow socket's answer: (the frame asked, the PULL socket's frames so far) -> the
#: reply's frame, or None (never answered)
Reply = Callable[[bytes, list[bytes]], bytes | None]


@contextmanager
def played_receiver(
    ctx: zmq.Context, reply: Reply
) -> Iterator[tuple[str, str, list[bytes], list[int]]]:
    """A PULL socket (its frames collected) and a ROUTER follow socket (the kind of each
    frame asked recorded, then answered with `reply`'s frame), both bound on loopback and
    read in a thread. Yields the PULL and the follow endpoints, the frames and the kinds
    asked; the thread is joined and both sockets closed at the end."""
    pull, router = ctx.socket(zmq.PULL), ctx.socket(zmq.ROUTER)
    for s in (pull, router):
        s.setsockopt(zmq.LINGER, 0)
        s.bind("tcp://127.0.0.1:*")
    frames: list[bytes] = []
    kinds: list[int] = []
    stop = threading.Event()

    def run() -> None:
        poller = zmq.Poller()
        poller.register(pull, zmq.POLLIN)
        poller.register(router, zmq.POLLIN)
        while not stop.is_set():
            ready = dict(poller.poll(20))
            if pull in ready:
                frames.append(pull.recv_multipart()[0])
            if router not in ready:
                continue
            identity, frame = router.recv_multipart()
            kinds.append(frame[P.KIND_AT])
            said = reply(frame, frames)
            if said is not None:
                router.send_multipart([identity, said])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield (str(pull.getsockopt_string(zmq.LAST_ENDPOINT)),
               str(router.getsockopt_string(zmq.LAST_ENDPOINT)), frames, kinds)  # fmt: skip
    finally:
        stop.set()
        thread.join()
        pull.close()
        router.close()
