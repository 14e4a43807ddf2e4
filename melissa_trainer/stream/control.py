"""Control messages from the launcher to the receivers (not from simulations): ABANDON
(`send_abandon`) and STUDY_END (`send_study_end`, `melissa_trainer.stream.study_end`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.common.words import plural
from melissa_trainer.wire.study_end import encode_study_end

CurveKeys = str | Sequence[str | None] | None


def send_abandon(
    endpoints: Sequence[str],
    simulation_id: int,
    timeout: float = 10.0,
    curve_public_key: CurveKeys = None,
    replaced: bool = False,
) -> None:
    """Tell every receiver to stop waiting for `simulation_id` (an ABANDON message);
    `replaced`: a redraw replaces it, so it does not count towards the expected number.

    Blocks until the message is handed to every connection, at most `timeout` seconds.
    `curve_public_key`: the receivers' CURVE server key, one for all or one per endpoint
    (None: that receiver has none), as each rank publishes its own in the rendezvous.

    Raises:
        TimeoutError: a receiver could not be reached in time.
    """
    message = protocol.encode_abandon(simulation_id, replaced)
    _send(endpoints, message, f"ABANDON of simulation {simulation_id}", timeout, curve_public_key)


def send_study_end(
    endpoints: Sequence[str],
    finished: Iterable[int],
    timeout: float = 10.0,
    curve_public_key: CurveKeys = None,
) -> None:
    """Tell every receiver that the study has ended, its launcher counting the
    `finished` ids finished (a STUDY_END message); as `send_abandon` otherwise.

    Raises:
        TimeoutError: a receiver could not be reached in time.
    """
    _send(endpoints, encode_study_end(finished), "STUDY_END", timeout, curve_public_key)


def _send(
    endpoints: Sequence[str], message: bytes, what: str, timeout: float, curve_public_key: CurveKeys
) -> None:
    """Send `message` (`what`, for the error) to every endpoint (`send_abandon`)."""
    context = zmq.Context()
    sockets: list[zmq.Socket] = []
    if curve_public_key is None or isinstance(curve_public_key, str):
        keys: list[str | None] = [curve_public_key] * len(endpoints)
    else:
        keys = list(curve_public_key)
        if len(keys) != len(endpoints):
            raise ValueError(
                f"{plural(len(keys), 'CURVE key')} for {plural(len(endpoints), 'endpoint')}"
            )
    try:
        for endpoint, key in zip(endpoints, keys, strict=True):
            sock = context.socket(zmq.PUSH)
            sockets.append(sock)
            sock.setsockopt(zmq.SNDTIMEO, int(timeout * 1000))
            if key is not None:
                sock.curve_serverkey = key.encode("ascii")
                sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
            sock.connect(endpoint)
            try:
                sock.send(message)
            except zmq.Again:
                raise TimeoutError(
                    f"{what} not delivered to {endpoint} within {timeout} s"
                ) from None
    finally:
        for sock in sockets:
            sock.close(linger=int(timeout * 1000))
        context.term()
