"""A user's ZeroMQ socket options: those the client relies on are refused when the
tuning is made (before anything connects), the rest reach the sockets as given."""

from __future__ import annotations

from typing import Any

import pytest
import zmq

from melissa_trainer.client import Client, ClientTuning


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({zmq.SNDTIMEO: -1}, r"zmq\.SNDTIMEO.*0\.5 s.*send_timeout"),
        ({zmq.SNDTIMEO: 5000}, r"zmq\.SNDTIMEO"),
        ({zmq.SNDHWM: 10}, r"zmq\.SNDHWM.*ClientTuning\.sndhwm"),
        ({zmq.LINGER: 0}, r"zmq\.LINGER.*close_timeout"),
        ({zmq.RECONNECT_IVL: -1}, r"zmq\.RECONNECT_IVL=-1.*stop reconnection.*at least 1"),
        ({zmq.RECONNECT_IVL: 0}, r"zmq\.RECONNECT_IVL=0"),
        ({zmq.RECONNECT_IVL: 1.5}, r"zmq\.RECONNECT_IVL=1\.5"),
        ({zmq.RECONNECT_STOP: 1}, r"zmq\.RECONNECT_STOP.*restarts"),
    ],
)
def test_an_option_the_client_relies_on_is_refused(options: dict[int, Any], match: str) -> None:
    with pytest.raises(ValueError, match=r"ClientTuning\.socket_options sets " + match):
        ClientTuning(socket_options=options)


@pytest.mark.timeout(30)
def test_harmless_options_reach_the_sockets_and_the_client_keeps_its_own() -> None:
    """A positive RECONNECT_IVL and a buffer size are the user's; the client's own
    SNDTIMEO slice, SNDHWM and LINGER stay (read back from the live socket)."""
    options = {zmq.RECONNECT_IVL: 7, zmq.RECONNECT_IVL_MAX: 900, zmq.SNDBUF: 8192}
    given = dict(options)
    tuning = ClientTuning(sndhwm=3, socket_options=given)
    given[zmq.SNDTIMEO] = -1  # changed after the check: the tuning kept its own copy
    assert tuning.socket_options == options
    ctx = zmq.Context()
    try:
        pull = ctx.socket(zmq.PULL)
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        client = Client(
            {"u": ((2,), "f8")},
            simulation_id=1,
            endpoints=f"tcp://127.0.0.1:{port}",
            tuning=tuning,
            context=ctx,
        )
        try:
            (sock,) = client._transport.sockets  # white box: the live socket's options
            got = {o: sock.getsockopt(o) for o in (*options, zmq.SNDTIMEO, zmq.SNDHWM)}
            assert got == {**options, zmq.SNDTIMEO: 500, zmq.SNDHWM: 3}
            assert sock.getsockopt(zmq.LINGER) == -1
        finally:
            client.close(bye=False)
        pull.close(linger=0)
    finally:
        ctx.destroy(linger=0)
