"""A client used in a child forked after it was made raises RuntimeError at once,
saying why, instead of hanging (melissa_trainer/client/forked.py); a child that only
exits leaves the parent's client working.

Before: the child's ``close(bye=False)`` hung for ever (in a poll of a socket monitor
whose events never come in a forked child): this test's child gave no answer within
20 s, with a large array sent without a copy still queued (a refused endpoint) or not.
The child reports through a pipe and always ends with ``os._exit``; one that does not
answer is killed."""

from __future__ import annotations

import os
import select
import signal

import numpy as np
import pytest
from held_ports import refused_endpoint

from melissa_trainer.client import Client, ClientTuning

pytestmark = [
    pytest.mark.e2e,  # (it forks a process)
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
]

SHAPE = (512, 512)  # 2 MiB: sent without a copy


def in_child(client: Client, use: str) -> str:
    """What `use` of `client` does in a forked child: "raised: MESSAGE", "returned", or
    "no answer" (the child killed after 20 s)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # (the child: never returns into pytest)
        try:
            os.close(read_end)
            try:
                if use == "close":
                    client.close(bye=False)
                else:
                    client.send(1, u=np.zeros(SHAPE))
                said = "returned"
            except RuntimeError as exc:
                said = f"raised: {exc}"
            os.write(write_end, said.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 20.0)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return "no answer"
        return os.read(read_end, 65536).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("use", ["close", "send"])
def test_a_forked_child_s_use_of_the_client_raises(use: str) -> None:
    endpoint = refused_endpoint()
    tuning = ClientTuning(failed_close_timeout=1.0)
    client = Client({"u": (SHAPE, "f8")}, None, 9, endpoint, send_timeout=0.3, tuning=tuning)
    with pytest.raises(TimeoutError, match="no receiver ever accepted a connection"):
        client.send(0, u=np.ones(SHAPE))  # (its array queued: nobody listens)
    said = in_child(client, use)
    assert said.startswith(
        f"raised: simulation 9 rank 0: this Client was made in process {os.getpid()} and "
        "this is a child forked from it (process "
    ), said
    assert "ZeroMQ sockets do not survive a fork" in said, said
    client.close(bye=False)  # (the parent's: unharmed, nothing raised)
    with pytest.raises(RuntimeError, match="the client is closed"):
        client.send(1, u=np.ones(SHAPE))  # (the parent's methods are its own)
