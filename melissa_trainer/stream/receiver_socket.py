"""The receiver's socket: a ZeroMQ PULL socket set up for the stream (`pull_socket`: the
high-water mark, the size bound and the peers' liveness options of `liveness`, the poll
timeout, CURVE), bound and published for the simulations (`bind_and_publish`: its
endpoint as they must dial it, in the rendezvous directory), and the error that says
what to do when binding fails (`bind_error`).

Called once per receiver, from the thread that starts it; the socket is then the
ingester's alone (`ingest_loop`).
"""

from __future__ import annotations

import errno
import logging
import os
from typing import Any

import zmq

from melissa_trainer.stream.endpoints import write_rendezvous
from melissa_trainer.stream.host_scope import loopback_name_notice
from melissa_trainer.stream.liveness import socket_options
from melissa_trainer.stream.receiver_address import advertised
from melissa_trainer.wire.routing import SIMULATION_STEP

#: `kept_of` (`wire.routing`): the rendezvous member listing the simulations of a
#: resumed receiver's ledgers that keep the routing ``t % W``, which the receiver
#: passes in `bind_and_publish`'s `extra`
__all__ = ["PortInUse", "bind_and_publish", "bind_error", "pull_socket"]

#: (the receiver's: its records name it, as its other warnings)
logger = logging.getLogger("melissa_trainer.stream.receiver")


class PortInUse(OSError):
    """The receiver's explicit TCP port is taken (another study's receiver, another
    program): a refusal to start, which names the port and the fix
    (`trainer.refusals.REFUSALS`: one line and exit status 2 inside
    ``refusals_end_the_program``, as a locked output_dir). ``errno`` is EADDRINUSE."""


def pull_socket(
    context: zmq.Context,
    rcvhwm: int,
    max_bytes: int,
    poll: float,
    curve: tuple[bytes, bytes] | None,
) -> zmq.Socket:
    """A PULL socket of `context`, not bound: at most `rcvhwm` messages queued per
    connection, messages over `max_bytes` (plus the header allowance) refused with their
    connection, `liveness`' options for its peers, a receive timeout of `poll` s (at
    least 1 ms), no linger, and a CURVE server with `curve` (secret, public key)."""
    sock = context.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, rcvhwm)
    for option, value in socket_options(max_bytes).items():
        sock.setsockopt(option, value)
    sock.setsockopt(zmq.RCVTIMEO, max(1, int(poll * 1000)))
    sock.setsockopt(zmq.LINGER, 0)
    if curve is not None:
        sock.curve_server = True
        sock.curve_secretkey, sock.curve_publickey = curve
    return sock


def bind_and_publish(
    sock: zmq.Socket,
    bind: str,
    advertise: str | None,
    rank: int,
    world_size: int,
    rendezvous: str | os.PathLike[str] | None,
    extra: dict[str, Any],
) -> str:
    """Bind `sock` to `bind` and return the endpoint simulations dial (`advertised`: a
    wildcard address, or any given `advertise`, replaced by a host name), written with `extra`
    into `rendezvous` (when given) as rank `rank` of `world_size`'s, with ``"routing":
    "simulation_step"``: this receiver takes that routing (`wire.routing`), so a client
    reading the rendezvous uses it, unless `extra` lists its simulation as one that
    keeps the routing ``t % W`` (`kept_of`). An endpoint published under a host name
    this machine resolves to loopback only is warned of, once
    (`host_scope.loopback_name_notice`).

    Raises:
        PortInUse: an explicit TCP port is taken (an OSError; the message is
            `bind_error`'s).
        OSError: the bind failed otherwise (its errno; the message is `bind_error`'s),
            or the rendezvous file cannot be written. The socket is left to the caller to close.
    """
    try:
        sock.bind(bind)
        endpoint = advertised(sock.getsockopt_string(zmq.LAST_ENDPOINT), advertise)
        if rendezvous is not None:
            advertised_routing = {"routing": SIMULATION_STEP, **extra}
            write_rendezvous(rendezvous, rank, world_size, endpoint, advertised_routing)
    except zmq.ZMQError as exc:
        kind = PortInUse if exc.errno == errno.EADDRINUSE and bind.startswith("tcp://") else OSError
        raise kind(exc.errno, bind_error(bind, rank, exc)) from exc
    # (once, at the start: a client elsewhere would otherwise be the first to find out)
    notice = loopback_name_notice(endpoint)
    if notice is not None:
        logger.warning("receiver of rank %d: %s", rank, notice)
    return endpoint


def bind_error(bind: str, rank: int, exc: zmq.ZMQError) -> str:
    """What went wrong binding `bind` (rank `rank`'s endpoint) and what to do about it."""
    message = f"receiver of rank {rank} cannot bind {bind}: {exc}"
    if exc.errno == errno.EADDRINUSE and bind.startswith("tcp://"):
        port = bind.rpartition(":")[2]
        message += (
            f": another program (or another trainer) listens on port {port}; find it with "
            f"`ss -ltnp 'sport = :{port}'`, or choose a free port in ReceiverConfig(bind=...) "
            "(the examples' --bind; an explicit port is offset by the rank: rank r binds "
            "port + r), or use port * "
            "(a random free port, published in the rendezvous directory)"
        )
    elif exc.errno == errno.EADDRNOTAVAIL:
        message += (
            ": this host has no such address; bind tcp://*:* (every interface) or one of "
            "this node's addresses, and set ReceiverConfig(advertise_host=...) if the name "
            "the simulations must use differs"
        )
    return message
