"""Where a receiver can be reached: the rendezvous file, advertised endpoints, CURVE keys."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import zmq

RENDEZVOUS_VERSION = 1


def write_rendezvous(
    directory: str | os.PathLike[str],
    rank: int,
    world_size: int,
    endpoint: str,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``{directory}/rank_{rank}.json`` (created with its parents).

    ``{"version": 1, "rank", "world_size", "endpoint"}`` plus `extra` keys (the CURVE
    server public key, when there is one), written to a temporary file then renamed,
    so that a client never reads it half-written. An older file is replaced.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {"version": RENDEZVOUS_VERSION, "rank": rank, "world_size": world_size}
    info.update(endpoint=endpoint, **(extra or {}))
    fd, tmp = tempfile.mkstemp(prefix=f".rank_{rank}.", suffix=".tmp", dir=path)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(info, f)
        final = path / f"rank_{rank}.json"
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return final


def curve_keys(
    secret: str | bytes | None, public: str | bytes | None
) -> tuple[bytes, bytes] | None:
    """Validated Z85 (secret, public) CURVE server keys, or None without CURVE."""
    if secret is None:
        if public is not None:
            raise ValueError("curve_public_key needs curve_secret_key")
        return None
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq was built without CURVE: cannot use curve keys")
    sk = secret.encode("ascii") if isinstance(secret, str) else bytes(secret)
    if len(sk) != 40:
        raise ValueError("CURVE keys must be 40-character Z85 strings (zmq.curve_keypair())")
    pk = zmq.curve_public(sk) if public is None else public
    pk = pk.encode("ascii") if isinstance(pk, str) else bytes(pk)
    if len(pk) != 40:
        raise ValueError("CURVE keys must be 40-character Z85 strings (zmq.curve_keypair())")
    return sk, pk


def advertised(endpoint: str, host: str | None) -> str:
    """Replace a wildcard bind address (or any, given `host`) by a reachable host name."""
    if not endpoint.startswith("tcp://"):
        return endpoint
    addr, _, port = endpoint[len("tcp://") :].rpartition(":")
    if host is None and addr.strip("[]") not in ("0.0.0.0", "*", "::"):
        return endpoint
    return f"tcp://{host or socket.gethostname()}:{port}"


def is_loopback(endpoint: str) -> bool:
    """True if only this machine can reach the endpoint."""
    if not endpoint.startswith("tcp://"):
        return True  # ipc:// and inproc:// stay on this machine
    addr = endpoint[len("tcp://") :].rpartition(":")[0].strip("[]")
    return addr in ("localhost", "::1") or addr.startswith("127.")
