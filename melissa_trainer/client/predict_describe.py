"""What a `Predictor` given its serving endpoint (``endpoint=``,
``$MELISSA_TRAINER_SERVE_ENDPOINTS``: no serve file, which publishes the inputs) learns
of the inputs the trainer serves before its first request on a connection (`describe`:
a DESCRIBE, answered by a DESCRIPTION, docs/protocol.md section 16, the codec of
`wire.predict_describe`), so that it checks each request before sending it, as with a
rendezvous: inputs of another dtype or shape are a ValueError, nothing sent. Without it
a request more than 1 MiB over the declared inputs (numpy's float64 for a large float32
input) was closed by the trainer's ZeroMQ without a word, and read as a trainer that
died (user trial 32).

Also `wait_answer`, the wait for the answer to a request (a DESCRIBE or a PREDICT) on
the link's socket, which says a trainer gone as soon as the connection drops. Imports
the standard library, pyzmq, `wire` and the client's own modules only.
"""

from __future__ import annotations

import time

import zmq

from melissa_trainer.client.predict_errors import (
    UNANSWERED,
    PredictionUnavailable,
    PredictTimeout,
)
from melissa_trainer.client.predict_link import PredictLink, poll_ms
from melissa_trainer.wire import Prediction, ProtocolError, Refusal
from melissa_trainer.wire.predict import decode_answer
from melissa_trainer.wire.predict_describe import Description, encode_describe

__all__ = ["describe", "lost", "wait_answer"]

_MAX_REPLY_BYTES = 1 << 30


def describe(
    link: PredictLink, simulation_id: int, request_id: int, deadline: float, timeout: float
) -> None:
    """Ask the trainer connected to (`link.socket`, connected: `wait_connected`) which
    inputs it serves, and keep its answer in `link.described` (its `inputs` then): the
    inputs, or () when it does not describe (a trainer before DESCRIBE refuses it
    ``bad_request``: the requests then go unchecked, as before; the trainer refuses
    inputs that are not its own, and closes the connection of one more than 1 MiB
    over them). Asked within the request's `deadline`.

    Raises:
        PredictTimeout: no answer in time, or the connection lost (`wait_answer`).
        PredictionUnavailable: a malformed answer (the endpoint named; the socket closed).
    """
    sock = link.socket
    assert sock is not None
    try:
        sock.send(encode_describe(simulation_id, request_id), flags=zmq.NOBLOCK)
    except zmq.Again:  # (the connection went since the poll)
        link.reset()
        raise PredictTimeout("the connection to the trainer's serving endpoint went") from None
    answer = wait_answer(link, deadline, timeout, request_id, "DESCRIBE")
    if isinstance(answer, Prediction):  # (its request id is the DESCRIBE's)
        endpoint = link.connected[0]
        link.reset()
        raise PredictionUnavailable(
            f"a malformed answer to DESCRIBE from the trainer's serving endpoint {endpoint}: "
            "a PREDICTION, not a DESCRIPTION"
        )
    link.described = tuple(answer.inputs) if isinstance(answer, Description) else ()


def wait_answer(
    link: PredictLink, deadline: float, timeout: float, request_id: int, what: str
) -> Description | Prediction | Refusal:
    """The answer to the request `request_id` (`what`: ``PREDICT`` or ``DESCRIBE``, for
    a malformed answer's words) sent on `link.socket`, waited for up to `deadline`;
    the answers to earlier requests are dropped. A trainer answers there: its backoff
    ends (`link.answered`).

    Raises:
        PredictTimeout: no answer in time (`UNANSWERED`: the connection is still up), or
            the connection dropped while the request waited (`lost`: at once).
        PredictionUnavailable: a malformed answer (the socket closed).
    """
    sock = link.socket
    assert sock is not None
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    if link.monitor is not None:
        poller.register(link.monitor, zmq.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            # (what the monitor says: a drop, even one of the last instant, is a
            # trainer gone; else the connection is up: `UNANSWERED`)
            if link.lost():
                raise lost(link)
            endpoint = link.connected[0]
            link.went_silent()  # (the next requests' connections: `SILENT`)
            link.reset()
            raise PredictTimeout(
                f"no prediction from the trainer's serving endpoint {endpoint} within "
                f"{timeout} s: {UNANSWERED}"
            )
        ready = dict(poller.poll(poll_ms(left)))
        if sock not in ready:
            if link.monitor in ready and link.lost():
                # The connection the request went on is gone: its answer cannot
                # come (a new connection is another peer to the trainer's socket).
                raise lost(link)
            continue  # (a long wait, polled in parts: `poll_ms`)
        reply = sock.recv_multipart(copy=False)
        try:
            message = decode_answer([f.buffer for f in reply], _MAX_REPLY_BYTES)
        except ProtocolError as exc:
            endpoint = link.connected[0]
            link.reset()
            if what == "PREDICT":  # (the words of a malformed PREDICTION, as before)
                raise PredictionUnavailable(f"a malformed reply from the trainer: {exc}") from None
            raise PredictionUnavailable(
                f"a malformed answer to {what} from the trainer's serving endpoint "
                f"{endpoint}: {exc}"
            ) from None
        if message.request_id != request_id:
            continue  # the late answer of an earlier request
        link.answered()  # (a trainer answers there)
        return message


def lost(
    link: PredictLink, when: str = "while the request waited for its answer"
) -> PredictTimeout:
    """The error of a request whose connection dropped (`when`; `link.gone`)."""
    return link.gone(
        f"the connection to the trainer's serving endpoint {link.connected[0]} was lost "
        f"{when} (the trainer stopped or died)"
    )
