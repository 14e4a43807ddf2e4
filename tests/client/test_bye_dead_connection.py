"""A BYE written into a connection that has already died is not delivered, and a close
must not say it was: ZeroMQ releases a message once written into the kernel's socket
(or dropped with a dying connection), not once the receiver has it, so the BYE's
release alone said "delivered" when the receiver had closed its end just before the
close wrote it (the trainer killed between the last send and the close). The close
now watches the connections until they have settled (`closing.BYE_SETTLE`): one that
ended as the BYE left fails the close ("BYE not delivered", the receiver named).

The trainer is a PULL socket of this process; "killing" it closes the socket (its
kernel ends the connections at once, as after a SIGKILL). How soon the client's ZeroMQ
I/O thread learns of it depends on the machine's load: the test gives the close a
second to watch (`BYE_SETTLE`, 10 ms by default), so that it checks the mechanism, not
the scheduler; it returns as soon as the connection is seen down.
"""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from melissa_trainer.client import Client, ClientTuning, closing

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("attempt", range(10))
def test_a_bye_written_into_a_dead_connection_is_not_delivered(
    attempt: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(closing, "BYE_SETTLE", 1.0)
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    endpoint = pull.getsockopt_string(zmq.LAST_ENDPOINT)
    tuning = ClientTuning(disconnected_timeout=1.0, replay_bytes=0, batch_bytes=0)
    c = Client({"u": ((4,), "<f4")}, {}, simulation_id=7, endpoints=endpoint, tuning=tuning)
    try:
        c.send(0, u=np.ones(4, "<f4"))
        assert pull.poll(10_000)
        pull.recv()  # the HELLO: the connection is up and read
        pull.close(linger=0)  # the trainer dies, its data unread: its kernel resets it
        with pytest.raises(TimeoutError, match="not delivered"):
            c.close()
    finally:
        c.close(bye=False)
        ctx.term()
