"""A `Client` in a child process forked after it was made: every use fails at once.

ZeroMQ's context and sockets do not survive a `fork`: the child has none of the
context's I/O thread, nor pyzmq's garbage-collector thread that tells a zero-copy frame
released (`held`). A child that called the inherited client's `close`, `send`, `flush`
or `predict` used to hang for ever (its close in a poll of a socket monitor whose
events never come: measured with a refused endpoint, every `array_reuse` mode; the
parent's own close was not harmed). A child that merely exits (``multiprocessing``'s
fork start method, `subprocess`'s) is unaffected: nothing here runs then.

`watch` keeps a weak reference to each client; after a fork, in the child only,
`os.register_at_fork` calls `refuse_uses` for each one alive, which replaces those
methods on the instance with one that raises `RuntimeError` saying so (no cost to a
send in the process that made the client: nothing is checked there). Tested in
tests/client/test_client_forked.py.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

__all__ = ["forked_words", "refuse_uses", "watch"]

#: the methods of a client that a forked child may not call
USES = ("send", "flush", "predict", "close")

#: each client alive and the pid of the process that made it
_LIVE: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def watch(client: Any) -> None:
    """Have `refuse_uses` called on `client`, made in this process, in every child
    forked while it is alive."""
    _LIVE[client] = os.getpid()


def refuse_uses(client: Any, made_in: int) -> None:
    """Make each of `client`'s `USES` raise RuntimeError (`forked_words`) from now on
    (`made_in`: the pid of the process that made it)."""
    words = forked_words(client.simulation_id, client.rank, made_in)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(words)

    for name in USES:
        setattr(client, name, refuse)


def forked_words(simulation_id: int, rank: int, made_in: int) -> str:
    """What a use of a client in a forked child raises (a RuntimeError's message)."""
    return (
        f"simulation {simulation_id} rank {rank}: this Client was made in process "
        f"{made_in} and this is a child forked from it (process {os.getpid()}): ZeroMQ "
        "sockets do not survive a fork (a use here would hang). Use the client in the "
        "process that made it; a child that streams makes its own Client after the fork"
    )


def _in_child() -> None:
    for client, made_in in list(_LIVE.items()):
        refuse_uses(client, made_in)


if hasattr(os, "register_at_fork"):  # (POSIX; a platform without fork needs nothing)
    os.register_at_fork(after_in_child=_in_child)
