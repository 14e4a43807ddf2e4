"""Where a receiver's sockets bind and how clients reach them: a bind address's form
(`bind_fault`), the endpoint advertised for a wildcard one (`advertised`), whether only
this machine reaches an endpoint (`is_loopback`), and the CURVE server keys
(`curve_keys`). The rendezvous file that publishes them: `endpoints`."""

from __future__ import annotations

import struct
from typing import Any

import zmq
from zmq.utils import z85


def curve_keys(
    secret: str | bytes | None, public: str | bytes | None
) -> tuple[bytes, bytes] | None:
    """Validated Z85 (secret, public) CURVE server keys, or None without CURVE; a
    `public` given must be `secret`'s pair (ValueError otherwise: never published)."""
    if secret is None:
        if public is not None:
            raise ValueError("curve_public_key needs curve_secret_key")
        return None
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq was built without CURVE: cannot use curve keys")
    sk = _z85(secret, "curve_secret_key")
    pk = zmq.curve_public(sk)
    if public is not None and _z85(public, "curve_public_key") != pk:
        # (published as is, every client's handshake would fail: the server answers
        # with its secret key's pair; neither key echoed)
        raise ValueError(
            "curve_public_key is not the public key of curve_secret_key (another key "
            "pair's): give the pair's own, zmq.curve_public(curve_secret_key), or leave "
            "curve_public_key None to have it derived"
        )
    return sk, pk


def _z85(key: str | bytes, name: str) -> bytes:
    """`key` as the ASCII bytes of a 40-character Z85 key. ValueError naming `name`,
    never the value (it may be the secret), if it is not one: checked as the clients'
    keys are (`client.server_key.z85_fault`), not for its length only, which let a
    40-character key outside Z85 reach libzmq's bare "Invalid argument" (or, a public
    one, the rendezvous files, where every client refused it)."""
    try:
        raw = key.encode("ascii") if isinstance(key, str) else bytes(key)
        ok = len(raw) == 40 and len(z85.decode(raw)) == 32
    except (KeyError, ValueError, struct.error):  # (outside Z85, not ASCII; over 2**32)
        ok = False
    if not ok:
        raise ValueError(
            f"CURVE keys must be 40-character Z85 strings (zmq.curve_keypair()): {name} is not one"
        )
    return raw


def advertised(endpoint: str, host: str | None) -> str:
    """Replace a wildcard bind address (or any, given `host`) by a reachable host name."""
    if not endpoint.startswith("tcp://"):
        return endpoint
    addr, _, port = endpoint[len("tcp://") :].rpartition(":")
    if host is None and addr.strip("[]") not in ("0.0.0.0", "*", "::"):
        return endpoint
    if not host:
        # (imported here: a client imports this module, and `socket` with `selectors`
        # would lengthen every simulation's start-up; only a receiver advertises)
        import socket

        host = socket.gethostname()
    return f"tcp://{host}:{port}"


def bind_fault(bind: Any) -> str | None:
    """What is wrong with `bind` as a ZeroMQ endpoint a socket of the trainer binds, or
    None: ``tcp://HOST:PORT`` (a host, an interface, ``*`` or a bracketed IPv6
    address; a port 0 to 65535 or ``*``, random) or ``ipc://PATH``. Checked where the
    bind is given: ZeroMQ's "Invalid argument" came only when the trainer bound, after
    its start-up (a user trial: ``bind="junk"`` failed training 31 s in)."""
    if not isinstance(bind, str):
        return f"a string like tcp://HOST:PORT, not {type(bind).__name__}"
    if bind.startswith("ipc://"):
        return None if len(bind) > len("ipc://") else "ipc:// needs a path"
    if not bind.startswith("tcp://"):
        return "like tcp://HOST:PORT (or ipc://PATH)"
    host, colon, port = bind[len("tcp://") :].rpartition(":")
    if not colon:
        return "like tcp://HOST:PORT: it has no port (PORT: a number, or * for a random one)"
    if not host or host.startswith("[") != host.endswith("]"):
        return f"like tcp://HOST:PORT, HOST an address, an interface or *, not {host!r}"
    if port != "*" and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        return f"like tcp://HOST:PORT, PORT a number 0 to 65535 or *, not {port!r}"
    return None


def is_loopback(endpoint: str) -> bool:
    """True if only this machine can reach the endpoint."""
    if not endpoint.startswith("tcp://"):
        return True  # ipc:// and inproc:// stay on this machine
    addr = endpoint[len("tcp://") :].rpartition(":")[0].strip("[]")
    return addr in ("localhost", "::1") or addr.startswith("127.")
