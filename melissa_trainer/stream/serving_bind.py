"""The serving socket's plumbing (`PredictServer`): the error of one that cannot bind
(`PredictServer.start`: what went wrong and what to do about it), and the I/O thread's
forwarding of the answers other threads hand it (`forward_answers`). Standard library
and pyzmq only."""

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
