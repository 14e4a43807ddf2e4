"""Whether anything listens at the endpoints of a rendezvous whose trainer processes
cannot be checked from here (`trainer_process`: another machine or pid namespace, or an
older trainer's file without its pid): a trainer killed there (``kill -9``, out of
memory) leaves its ``rank_N.json`` files, not marked stopped, and a solver that took
them sent into the void and failed its close 180 s later (60 s disconnected, then 120 s
for a resumed trainer: a user's question).

A killed process's port has no listener: its kernel, alive, refuses the connection at
once. A live trainer's kernel accepts it, however busy (or stopped, SIGSTOP) the
trainer is; a receiver binds before it writes its file (`receiver_socket.bind_and_publish`),
so a published endpoint is listened on from the start. `refused` dials each endpoint
with a ZeroMQ PUSH socket, as a client does (with the published CURVE key: the handshake
completes and the receiver, which says nothing of a peer that closes without a HELLO,
logs nothing; a raw TCP connection closed unanswered would be warned of there as a
handshake refused), and reads its monitor for at most `WINDOW` seconds:

- ``CLOSED`` before any ``CONNECTED`` (a socket opened, its connect failed: refused, or
  the host or its network unreachable, an ICMP "unreachable" or no route: libzmq closes
  the socket on ECONNREFUSED, EHOSTUNREACH and ENETUNREACH alike): refused;
- ``CONNECTED`` (the kernel accepted), or a handshake's end: not refused (its handshake
  awaited, within the window, so that the receiver sees a clean close);
- ``CONNECT_RETRIED`` without a ``CLOSED`` (no socket was opened: a host name that does
  not resolve), or nothing in the window (a firewall that drops, a node gone): not
  refused, as before (the client takes the files; its sends and close say the rest).

Only ``tcp://`` endpoints are dialled (an ``ipc://`` one is on the trainer's machine: the
pid check's, or nobody's). The C client does the same (clients/c/src/trainer_listens.c),
with the same words (`refused_words`). No state but the caller's `heard` (the file
versions that did not refuse); each call its own context.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from melissa_trainer.stream.host_scope import out_of_reach
from melissa_trainer.stream.trainer_process import trainer_runs

__all__ = ["WINDOW", "refused", "refused_files", "refused_words", "version"]

#: seconds `refused` waits for the endpoints' answers (a refusal comes in one round
#: trip; only a firewall that drops, or a node gone, makes it wait that long)
WINDOW = 1.0
_EVENTS = (
    zmq.EVENT_CONNECTED
    | zmq.EVENT_CLOSED
    | zmq.EVENT_CONNECT_RETRIED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_DISCONNECTED
)


def version(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What tells a file's versions apart for `refused_files`' `heard`: its run id,
    endpoint and pid (a trainer resumed, or another rank's, rewrites one of them)."""
    return (entry.get("run_id"), entry["endpoint"], entry.get("pid"))


def refused_files(
    entries: Sequence[dict[str, Any]],
    loopback: Callable[[str], bool],
    heard: set[tuple[Any, ...]] | None = None,
) -> dict[int, str]:
    """The ranks of complete rendezvous `entries` (in rank order) whose endpoint refused
    the connection, with why (`refused_words`): among those whose trainer process cannot
    be checked here (`trainer_process.trainer_runs` None), of a ``tcp://`` endpoint this
    process may reach (one out of reach, `host_scope.out_of_reach`, is its caller's to
    say at once; `loopback`: `receiver_address.is_loopback`, as `endpoints` gives it).

    `heard` (kept by the caller across its looks at one rendezvous): the `version` of
    each file whose endpoint did not refuse, added here; such a file is not dialled
    again while another is refused (a client looks every 0.25 s, and each look dialled
    the live ranks again, up to `WINDOW` s each). A refused one is dialled at each look
    (a refusal costs one round trip, and a host unreachable for a moment may be reached
    at the next). None refused of those dialled, the files are about to be taken: those
    heard at an earlier look are dialled again first (one may have died since, its file
    unchanged: taken unchecked, a client sent to a dead rank)."""
    known = set() if heard is None else heard
    reachable = [
        rank
        for rank, e in enumerate(entries)
        if e["endpoint"].startswith("tcp://")
        and trainer_runs(e) is None
        and out_of_reach(e["endpoint"], e, loopback(e["endpoint"])) is None
    ]
    skipped = [rank for rank in reachable if version(entries[rank]) in known]
    found = _dial(entries, [rank for rank in reachable if rank not in skipped], known)
    if not found and skipped:
        found = _dial(entries, skipped, known)
    return found


def _dial(
    entries: Sequence[dict[str, Any]], asked: list[int], known: set[tuple[Any, ...]]
) -> dict[int, str]:
    """The ranks `asked` of `entries` whose endpoint refused, with why; the `version` of
    each that did not added to `known`."""
    if not asked:
        return {}
    dials = [(entries[r]["endpoint"], entries[r].get("curve_public_key")) for r in asked]
    said = refused(dials)
    known.update(version(entries[r]) for r, no in zip(asked, said, strict=True) if not no)
    return {r: refused_words(entries[r]) for r, no in zip(asked, said, strict=True) if no}


def refused(dials: Sequence[tuple[str, str | None]], window: float = WINDOW) -> list[bool]:
    """For each ``(endpoint, curve_public_key)`` of `dials` (``tcp://`` ones; the key
    None without CURVE), whether its connection was refused (module docstring), told
    within `window` seconds for all together."""
    verdicts = [False] * len(dials)
    context = zmq.Context()
    sockets: list[zmq.Socket] = []
    monitors: dict[zmq.Socket, int] = {}
    try:
        for i, (endpoint, key) in enumerate(dials):
            sock = context.socket(zmq.PUSH)
            sock.linger = 0
            sockets.append(sock)
            try:
                if key is not None:  # (a key libzmq refuses, no CURVE: not dialled)
                    sock.curve_serverkey = key.encode("ascii")
                    sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
                address = f"inproc://melissa-listens-{i}"
                sock.monitor(address, _EVENTS)
                monitor = context.socket(zmq.PAIR)
                monitor.linger = 0
                sockets.append(monitor)
                monitor.connect(address)
                sock.connect(endpoint)  # (a form libzmq refuses: not told, taken)
            except (zmq.ZMQError, UnicodeError):
                continue
            monitors[monitor] = i
        _read(monitors, verdicts, window)
    finally:
        for sock in sockets:  # (and the monitors: all closed, or `term` would wait)
            sock.close(linger=0)
        context.term()
    return verdicts


def _read(monitors: dict[zmq.Socket, int], verdicts: list[bool], window: float) -> None:
    """Read `monitors` (monitor -> index) until each endpoint is told, or `window` s."""
    poller = zmq.Poller()
    for monitor in monitors:
        poller.register(monitor, zmq.POLLIN)
    deadline = time.monotonic() + window
    waiting, connected = set(monitors.values()), set()
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            return  # (not told: not refused)
        for monitor, _ in poller.poll(max(1, int(left * 1000))):
            i = monitors[monitor]
            event = struct.unpack("=HI", monitor.recv_multipart()[0][:6])[0]
            if i not in waiting:
                continue  # (told already: a later reconnection's events)
            if event == zmq.EVENT_CONNECTED:
                connected.add(i)  # (accepted: its handshake's end awaited)
            elif event == zmq.EVENT_CLOSED and i not in connected:
                verdicts[i] = True  # (a socket opened, its connect failed: refused)
                waiting.discard(i)
            else:  # (a handshake's end, a close; or a retry without a socket: unresolved)
                waiting.discard(i)


def refused_words(entry: dict[str, Any]) -> str:
    """Why a rendezvous file (`entry`) whose endpoint refused the connection is not
    taken, after ``rank_N.json: `` (the C client's words too)."""
    pid, host = entry.get("pid"), entry.get("host")
    who = ""
    pid = pid if type(pid) is int and 0 < pid <= 0x7FFFFFFF else None  # (the C client's)
    if pid is not None and isinstance(host, str):
        who = f" (pid {pid} on {host})"
    elif isinstance(host, str):
        who = f" (on {host})"
    return (
        f"nothing accepts connections at {entry['endpoint']} (refused, or its host "
        f"unreachable): its trainer{who} is gone without marking it stopped (killed: "
        "kill -9, out of memory?), or a firewall rejects this machine: start the trainer "
        "first (resumed: --resume_from_checkpoint latest), or point "
        "MELISSA_TRAINER_RENDEZVOUS at the running trainer's {output_dir}/rendezvous"
    )
