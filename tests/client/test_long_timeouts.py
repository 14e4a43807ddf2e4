"""Long and infinite timeouts of the Python client: ZeroMQ takes milliseconds in a C
int (SNDTIMEO, LINGER, RCVTIMEO), so a bound past 2**31 - 1 ms (24.8 days) made pyzmq
raise OverflowError (a close that left its sockets and context open), and +inf made
``int(inf)`` raise. Now both are capped at ZeroMQ's longest bound (`sockets.to_ms`)."""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from melissa_trainer import wire as P
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.sockets import MAX_MS, to_ms

THIRTY_DAYS = 30 * 86400.0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout", [float("inf"), THIRTY_DAYS], ids=["inf", "30_days"])
def test_sends_and_close_with_a_long_or_infinite_timeout_deliver_everything(
    timeout: float,
) -> None:
    """Neither fails nor returns at once: every step reaches a real socket, then the BYE."""
    ctx = zmq.Context()
    try:
        pull = ctx.socket(zmq.PULL)
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        client = Client(
            {"u": ((1 << 17,), "f8")},  # 1 MiB: held by ZeroMQ, not copied
            simulation_id=3,
            endpoints=f"tcp://127.0.0.1:{port}",
            tuning=ClientTuning(close_timeout=timeout, disconnected_timeout=timeout, batch_bytes=0),
            send_timeout=timeout,
        )
        with client:
            for step in range(3):
                client.send(step, u=np.full(1 << 17, step, float))
        kinds = []
        while not kinds or kinds[-1] != P.BYE:
            assert pull.poll(20_000), f"no BYE after {kinds}"
            kinds.append(pull.recv_multipart()[0][P.KIND_AT])
        assert kinds.count(P.DATA) == 3
        pull.close(linger=0)
    finally:
        ctx.destroy(linger=0)


def test_milliseconds_for_zeromq_are_capped_at_its_int() -> None:
    assert MAX_MS == 2**31 - 1
    assert [to_ms(s) for s in (-1.0, 0.0, float("nan"), 1.5, 2.0**31 / 1000)] == [
        0,
        0,
        0,
        1500,
        MAX_MS,
    ]
    assert to_ms(THIRTY_DAYS) == to_ms(float("inf")) == MAX_MS
