"""The DEALER socket of a `Predictor` to a serving endpoint, as `predict_link.PredictLink`
opens it, and the checks of its endpoint that need no trainer.

Contract:

* `open_socket`: a DEALER connected to `endpoint` (nothing queued for a peer not there:
  ``ZMQ_IMMEDIATE``; no linger; its TCP connect bounded by `connect_ms`), with a CURVE
  key pair of its own when the server's `key` is given, and its monitor socket watching
  `WATCHED`. Raises ValueError for a key that is not a Z85 key (`malformed_serve_key`,
  naming where it was read) and an endpoint ZeroMQ cannot connect to; nothing stays
  open after a failure.
* `check_host`: raises the `unresolved` error (ValueError for an endpoint given, a
  trainer gone for one read from a serve file) when the host name of a ``tcp://``
  endpoint does not resolve, which ZeroMQ reports as a connection refused; each name
  resolves once per `resolved` set.
* The monitor's event masks: `HANDSHAKE_FAILED` (a handshake the server refused), `GONE`
  (a connection refused or dropped) and `WATCHED` (what the monitor reports).

Imports the standard library and pyzmq only (`socket`: this module is loaded at a first
request, never by ``import melissa_trainer.client``).
"""

from __future__ import annotations

import socket

import zmq

from melissa_trainer.client.predict_endpoint import ENV_SERVE_KEY
from melissa_trainer.client.predict_errors import malformed_serve_key, unresolved
from melissa_trainer.client.server_key import z85_fault
from melissa_trainer.stream.rank_bounds import type_name

__all__ = ["GONE", "HANDSHAKE_FAILED", "WATCHED", "check_host", "open_socket"]

#: the monitor events of a handshake the server refused (a missing or wrong CURVE key)
HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
#: the monitor events of a trainer gone: a connection attempt that failed (refused:
#: nothing listens there), and an established connection dropped
GONE = zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_DISCONNECTED
#: the monitor's events: those, connections made, and connects in progress (which tell
#: an attempt abandoned at the connect bound from one refused: `predict_events`)
WATCHED = HANDSHAKE_FAILED | GONE | zmq.EVENT_CONNECTED | zmq.EVENT_CONNECT_DELAYED


def open_socket(
    context: zmq.Context,
    endpoint: str,
    key: str | None,
    connect_ms: int,
    serve_file: str | None,
) -> tuple[zmq.Socket, zmq.Socket]:
    """The DEALER to `endpoint` and its monitor (module docstring); `key` is the server's
    CURVE key as read (a serve file may hold anything: checked here, else libzmq's bare
    "Invalid argument"), `serve_file` where it was read (its words)."""
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IMMEDIATE, 1)  # never queue a request for a peer not there
    sock.setsockopt(zmq.CONNECT_TIMEOUT, connect_ms)
    if key is not None:
        fault = z85_fault(key) if isinstance(key, str) else f"a str, not {type_name(key)}"
        if fault is not None:
            sock.close(linger=0)
            raise malformed_serve_key(key, fault, ENV_SERVE_KEY, serve_file)
        sock.curve_serverkey = key.encode("ascii")
        sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
    monitor = sock.get_monitor_socket(WATCHED)
    try:
        sock.connect(endpoint)
    except zmq.ZMQError as exc:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        raise ValueError(f"cannot connect to serving endpoint {endpoint!r}: {exc}") from None
    return sock, monitor


def check_host(endpoint: str, resolved: set[str], given: bool) -> None:
    """Raise the `unresolved` error when the host name of `endpoint` does not resolve
    (`given`: the endpoint was given, not read from a serve file); a name that resolves
    is added to `resolved` and not resolved again (a trainer gone costs no lookup after
    the first)."""
    if not endpoint.startswith("tcp://"):
        return
    # tcp://[source;]host:port, the host maybe a bracketed IPv6 address
    host = endpoint[len("tcp://") :].rpartition(";")[2].rpartition(":")[0].strip("[]")
    if not host or host in resolved:
        return
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise unresolved(
            endpoint, host, str(getattr(exc, "strerror", None) or exc), given
        ) from None
    resolved.add(host)
