"""The end of a worker's one ZeroMQ context (`worker.serve_simulations` makes it for
the worker's life, shared by its simulations' clients): terminated, unless a socket of
it is still open. Imports only pyzmq and the standard library."""

from __future__ import annotations

import sys

import zmq

__all__ = ["end_context"]


def end_context(context: zmq.Context, program: str) -> None:
    """Terminate the worker's `context`, unless a socket made on it is still open (a
    `Client` that `run` did not close, or a socket of `run`'s own): then say so on
    stderr, once, and leave the context to the process's exit. `term` would wait for
    that socket's close forever: the exception ending the loop (whose traceback holds
    the unclosed client) was never raised, nor the worker ended, until the launcher
    killed it as silent, its log without the error (a user trial)."""
    # (pyzmq's own `Context.destroy` reads the same set; a pyzmq without it: term)
    sockets = list(getattr(context, "_sockets", None) or [])
    left = sum(1 for s in sockets if s is not None and not s.closed)
    if not left:
        context.term()
        return
    print(
        f"{program}: {left} ZeroMQ socket(s) of this worker's context still open at its "
        f"end: a Client that run did not close (open each in a `with` block, which closes "
        f"it on an exception too), or a socket of run's own; not waited for",
        file=sys.stderr,
    )
