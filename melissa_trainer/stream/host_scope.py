"""Who can reach a loopback endpoint: the processes of one network namespace of one
running kernel. A receiver publishes, beside its endpoint in its rendezvous file, the
host it runs on and that scope (`published_scope`), and so does a serving socket in its
serve file (``serve_N.json``: `serving_rendezvous.write_serving`); a client that read
a loopback endpoint there from another scope (another machine: a Slurm compute node, an
mpiexec host; or a container with its own network on the same machine) can never
connect to it: `out_of_reach` says so at once, naming both hosts and the fix, where a
`Client` would otherwise retry for its ``disconnected_timeout`` (60 s) and then blame
a trainer that was never started, and a `Predictor` would wait out each request's
timeout (`client.predict_endpoint`).

The scope is ``"<boot id>/<device>:<inode>"``: the kernel's boot id (a random UUID per
boot, so per machine) and the identity of ``/proc/self/ns/net`` (the network namespace:
its loopback interface is its own; an ``ipc://`` endpoint, a Unix socket, is reached from
any namespace of its machine). Linux only; elsewhere there is none, and nothing is
checked. A host *name* counts as loopback where this process resolves it to loopback
addresses only (an /etc/hosts that maps the trainer's host name to 127.0.0.1 or
127.0.1.1, shared by a cluster's nodes or a container's: the receiver's published
``tcp://<its host name>:PORT`` then leads a client there to its own loopback); it is
resolved only when the scopes differ. Endpoints a client is given directly (``endpoints=``,
``MELISSA_TRAINER_ENDPOINTS``; ``endpoint=``, ``MELISSA_TRAINER_SERVE_ENDPOINTS``) are
never checked: a tunnel (``ssh -L``) can carry a
loopback port to another machine on purpose.

Standard library only; no state, thread-safe.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, NamedTuple

__all__ = [
    "HOST_KEY", "RECEIVER", "SCOPE_KEY", "SERVING", "Publisher", "loopback_name_notice",
    "loopback_scope", "out_of_reach", "published_scope",
]  # fmt: skip

#: the rendezvous file's keys (`endpoints.write_rendezvous`)
HOST_KEY = "host"
SCOPE_KEY = "loopback_scope"

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_NETNS = "/proc/self/ns/net"


class Publisher(NamedTuple):
    """Whose endpoint `out_of_reach` speaks of, in its words: the stream receiver's
    (`RECEIVER`, a `Client`'s) or the serving socket's (`SERVING`, a `Predictor`'s).

    Attributes:
        who: what published it ("the receiver").
        bind: how the trainer binds an interface the simulations reach.
        given: where endpoints are given directly (never checked).
    """

    who: str
    bind: str
    given: str


RECEIVER = Publisher(
    "the receiver",
    "StreamSource(ReceiverConfig(bind='tcp://*:*')) (the examples: --bind 'tcp://*:*')",
    "endpoints= or MELISSA_TRAINER_ENDPOINTS",
)
#: (a serving socket binds its receiver's interface and advertises its host:
#: `hooks.serving_socket.rank_server`; an explicit ServingHook(bind=...) its own)
SERVING = Publisher(
    "the trainer's serving socket",
    "StreamSource(ReceiverConfig(bind='tcp://*:*')) (the examples: --bind 'tcp://*:*'; "
    "the serving socket binds the receiver's interface), or ServingHook(bind='tcp://*:*')",
    "endpoint= or MELISSA_TRAINER_SERVE_ENDPOINTS",
)


def _hostname() -> str:
    """The host's name (`socket.gethostname`'s: the kernel's node name), without loading
    the socket module: a client's import stays light (test_client_imports.py)."""
    return os.uname().nodename


@lru_cache(maxsize=1)
def loopback_scope() -> str | None:
    """This process's scope (see the module docstring), or None where it cannot be read
    (not Linux, /proc not mounted). Read once: a process does not change machine, and
    one that changes network namespace (`setns`) is not this library's."""
    try:
        with open(_BOOT_ID) as f:
            boot = f.read().strip()
        st = os.stat(_NETNS)
    except OSError:
        return None
    return f"{boot}/{st.st_dev}:{st.st_ino}" if boot else None


def published_scope() -> dict[str, Any]:
    """What a receiver writes beside its endpoint: its host name and its scope (left
    out where none: `loopback_scope`)."""
    scope = loopback_scope()
    return {HOST_KEY: _hostname(), **({} if scope is None else {SCOPE_KEY: scope})}


def _loopback_name(endpoint: str) -> list[str] | None:
    """The addresses this process resolves `endpoint`'s host name to, when they are all
    loopback (127.0.0.0/8, ::1); None for an address literal, a wildcard, a name that
    does not resolve here (the connection's own error will say it) or one with an
    address another machine could reach."""
    if not endpoint.startswith("tcp://"):
        return None
    name = endpoint[len("tcp://") :].rpartition(":")[0].strip("[]")
    if not name or name == "*" or ":" in name or name.replace(".", "").isdigit():
        return None
    import socket  # (here: a client's import stays light; only resolved when scopes differ)

    try:
        found = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    addresses = sorted({str(info[4][0]) for info in found})
    if not addresses or not all(a == "::1" or a.startswith("127.") for a in addresses):
        return None
    return addresses


def loopback_name_notice(endpoint: str) -> str | None:
    """What a receiver says once at its start (`receiver_socket.bind_and_publish`) when
    it publishes `endpoint` under a host name this machine resolves to loopback only
    (``tcp://*:*`` publishes the host's name, which Debian's /etc/hosts maps to
    127.0.1.1, a cluster's shared one sometimes to 127.0.0.1): a client on another
    machine that resolves the name so too cannot reach it (it is told at once:
    `out_of_reach`). None for an address, or a name another machine could reach."""
    named = _loopback_name(endpoint)
    if named is None:
        return None
    return (
        f"it publishes {endpoint}, whose host name this machine resolves to loopback only "
        f"({', '.join(named)}: /etc/hosts?): clients on other machines that resolve it so "
        "too (a cluster's shared /etc/hosts) will not reach it (nor its serving socket, "
        "published under the same name), and fail at once (ReceiverUnreachable, "
        "PredictUnreachable). To publish an address they reach: "
        "ReceiverConfig(advertise_host='ADDRESS') (the examples: --bind 'tcp://ADDRESS:*'). "
        "Fine for a study whose simulations all run on this machine."
    )


def out_of_reach(
    endpoint: str, entry: dict[str, Any], loopback: bool, publisher: Publisher = RECEIVER
) -> str | None:
    """Why this process cannot reach the `endpoint` a rendezvous `entry` of `publisher`
    (a receiver's ``rank_N.json``, a serving socket's ``serve_N.json``) published, or
    None if it can (or it cannot be told: an entry without a scope, of an older trainer;
    no scope here). `loopback`: the endpoint's address is this machine's only
    (`receiver_address.is_loopback`); when not, and the scopes differ, a host name this
    process resolves to loopback addresses only counts as loopback (`_loopback_name`)."""
    theirs, mine = entry.get(SCOPE_KEY), loopback_scope()
    if not isinstance(theirs, str) or mine is None or theirs == mine:
        return None
    # (a name that resolves to loopback here leads this process to its own loopback:
    # found on the two-node test cluster, whose nodes share /etc/hosts)
    named = None if loopback else _loopback_name(endpoint)
    if not loopback and named is None:
        return None
    host, here = str(entry.get(HOST_KEY, "?")), _hostname()
    boot_theirs, boot_mine = theirs.partition("/")[0], mine.partition("/")[0]
    if endpoint.startswith("ipc://") and boot_theirs == boot_mine:
        return None  # (a Unix socket: a file of this machine, any network namespace's)
    where = (
        f"this process runs on host {here!r}, another machine"
        if boot_theirs != boot_mine
        else f"this process runs on the same machine ({here!r}) but in another network "
        "namespace (a container with its own network?), with a loopback of its own"
    )
    if named is not None:
        return (
            f"{publisher.who} published the endpoint {endpoint} (its host {host!r}), whose "
            f"name this process resolves to loopback only ({', '.join(named)}: /etc/hosts?), "
            f"its own machine's; {where}: no connection can ever be made. Publish the "
            "trainer's host by an address the simulations reach: "
            "ReceiverConfig(bind='tcp://*:*', advertise_host='ADDRESS'), or bind that "
            "address (the examples: --bind 'tcp://ADDRESS:*'); keep the port behind a "
            f"firewall. (Endpoints given directly, {publisher.given}, are not checked: a "
            "tunnel may carry them.)"
        )
    return (
        f"{publisher.who} published the loopback endpoint {endpoint} (its host {host!r}), "
        f"which only processes of its own machine and network reach; {where}: no "
        "connection can ever be made. The trainer must bind an interface the simulations "
        f"reach: {publisher.bind}, with advertise_host=... when they know its host "
        "by another name; keep the port behind a firewall. (Endpoints given directly, "
        f"{publisher.given}, are not checked: a tunnel may carry them.)"
    )
