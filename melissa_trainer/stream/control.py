"""Control messages from the launcher to the receivers (not from simulations)."""

from __future__ import annotations

from collections.abc import Sequence

import zmq

from melissa_trainer.stream import protocol


def send_abandon(
    endpoints: Sequence[str],
    simulation_id: int,
    timeout: float = 10.0,
    curve_public_key: str | None = None,
    replaced: bool = False,
) -> None:
    """Tell every receiver to stop waiting for `simulation_id` (an ABANDON message);
    `replaced`: a redraw replaces it, so it does not count towards the expected number.

    Blocks until the message is handed to every connection, at most `timeout` seconds.

    Raises:
        TimeoutError: a receiver could not be reached in time.
    """
    message = protocol.encode_abandon(simulation_id, replaced)
    context = zmq.Context()
    sockets: list[zmq.Socket] = []
    try:
        for endpoint in endpoints:
            sock = context.socket(zmq.PUSH)
            sockets.append(sock)
            sock.setsockopt(zmq.SNDTIMEO, int(timeout * 1000))
            if curve_public_key is not None:
                sock.curve_serverkey = curve_public_key.encode("ascii")
                sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
            sock.connect(endpoint)
            try:
                sock.send(message)
            except zmq.Again:
                raise TimeoutError(
                    f"ABANDON of simulation {simulation_id} not delivered to {endpoint} "
                    f"within {timeout} s"
                ) from None
    finally:
        for sock in sockets:
            sock.close(linger=int(timeout * 1000))
        context.term()
