"""A ZMTP 3.1 PUSH peer written by hand (the `socket` module, no ZeroMQ), for tests.

``python zmtp_peer.py ENDPOINT MIB``: connect, complete the NULL handshake, announce a
frame of `ANNOUNCED` bytes, send MIB MiB of it, print "stalled", and wait forever.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

import psutil

ANNOUNCED = 512 << 20  # the frame size a stalled peer announces


def zmtp_push_peer(endpoint: str, source: str | None = None) -> socket.socket:
    """A plain TCP socket (from address `source`, if given) that has completed the
    ZMTP 3.1 NULL handshake as a PUSH peer with the receiver at ``tcp://HOST:PORT``."""
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    src = None if source is None else (source, 0)
    sock = socket.create_connection((host, int(port)), timeout=10, source_address=src)
    greeting = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\0")
    sock.sendall(greeting + b"\0" + bytes(31))  # as-server 0, filler: 64 bytes
    name, value = b"Socket-Type", b"PUSH"
    body = b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
    sock.sendall(bytes([0x04, len(body)]) + body)  # a short command frame
    got = b""
    while len(got) < 64:  # the receiver's greeting (what follows is read, or not, later)
        chunk = sock.recv(64 - len(got))
        if not chunk:
            raise ConnectionError("the receiver closed the connection during the handshake")
        got += chunk
    if got[0] != 0xFF or got[9] != 0x7F or got[10] != 3:
        raise ConnectionError(f"not a ZMTP 3 greeting: {got!r}")
    return sock


def stall_mid_frame(sock: socket.socket, sent: int) -> None:
    """Announce a long frame of ANNOUNCED bytes (flags: LONG, no MORE); send `sent`."""
    sock.sendall(b"\x02" + struct.pack(">Q", ANNOUNCED))
    chunk = bytes(1 << 20)
    for _ in range(sent >> 20):
        sock.sendall(chunk)


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Whether the other end closes `sock` within `within` seconds (what it sends
    meanwhile is read and ignored)."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(1 << 16):
                return True
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def rss(pid: int | None = None) -> int:
    """Resident memory of process `pid` (this one by default), in bytes."""
    return int(psutil.Process(pid).memory_info().rss)


if __name__ == "__main__":
    peer = zmtp_push_peer(sys.argv[1])
    stall_mid_frame(peer, int(sys.argv[2]) << 20)
    print("stalled", flush=True)
    while True:
        time.sleep(3600)
