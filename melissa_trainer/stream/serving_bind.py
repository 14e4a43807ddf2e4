"""The serving socket's plumbing (`PredictServer`): the error of one that cannot bind
(`PredictServer.start`: what went wrong and what to do about it), and the I/O thread's
forwarding of the answers other threads hand it (`forward_answers`). Standard library
and pyzmq only.

Every reply is sent copied (``copy=True``), never shared with libzmq. A frame of 64 KiB
or more (pyzmq's ``copy_threshold``) sent without a copy is let go of through pyzmq's
collector thread: a blocking send to its queue (1,000 deep at each end), from whichever
thread drops the last reference to it. That may be a thread holding Python's lock: the
I/O thread dropping the frames it forwarded here, or an answering thread (training's).
With the collector behind (starved of that lock), the queue fills, the send waits for a
collector that waits for the lock, and the whole trainer hangs: 3,000 answers of 64 KiB
with the collector stalled did (`tests/stream/test_serving_collector.py`). Below 64 KiB
pyzmq copies anyway (the replies of `benchmarks/closed_loop.py`, 256 bytes, are as
before). Above, the copy may cost hand-off throughput: `benchmarks/serve_answer_copy.py`
read copied / zero-copy answers per second of 1.41 and 0.66 at 64 KiB, 1.01 and 0.37 at
1 MiB in two runs on a 2-core machine at load 10, each arm's rounds spread 2 to 5x
(`benchmarks/results/serve_answer_copy.txt`): still thousands of answers a second of
64 KiB and hundreds of 1 MiB (medians 486 and 1,034), where `closed_loop.py`'s client
asks 50 a second."""

from __future__ import annotations

import errno

import zmq

__all__ = ["bind_error", "forward_answers"]


def bind_error(bind: str, rank: int, exc: zmq.ZMQError) -> str:
    """What went wrong binding rank `rank`'s serving socket, and what to do about it."""
    message = f"the serving socket of rank {rank} cannot bind {bind}: {exc}"
    if exc.errno == errno.EADDRINUSE:
        message += (
            ": another program (or another trainer, or another rank given the same "
            "endpoint) listens there; choose a free port in ServingHook(bind=...) (an "
            "explicit port is offset by the rank: rank r binds port + r), or leave bind "
            "out (a random free port, published in the rendezvous's serve_{rank}.json)"
        )
    return message


def forward_answers(replies: zmq.Socket, router: zmq.Socket) -> None:
    """Send on `router` every answer waiting on `replies` (identity first), without
    blocking: the answers the other threads handed over. The I/O thread's only."""
    while True:
        try:
            frames = replies.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return
        router.send_multipart(frames, copy=False)
