"""Network namespaces that stand in for nodes, for tests/trainer/test_multinode.py (Linux, root).

Topology: one namespace per node (e.g. "node0", "node1", "sims"), each holding one end
of a veth pair named `INTERFACE` with the address ``{SUBNET}.{i + 1}/24`` and `lo` up;
the other ends are ports of a bridge that lives in a fourth, "hub" namespace. The
bridge is in a namespace of its own rather than in the host's so that nothing of the
host's network (its interfaces, routes, firewall and br_netfilter rules) sees or
filters the traffic, and so that deleting the namespaces removes every link: the
addresses cannot clash with the host's, whatever the subnet.

Each node's loopback is its own: a socket bound on 127.0.0.1 in one node cannot be
reached from another (`check_isolation` proves it), so what connects crossed a veth.
The namespaces share the host's file systems, processes and host name (one UTS
namespace): anything that advertises ``socket.gethostname()`` points at no node, and
the tests pass each node's address explicitly (``advertise_host``), as users on real
nodes with several interfaces do.

Names are ``{PREFIX}{pid}-{role}``, pid being the test process's: runs side by side do
not collide, and a run killed before its clean-up leaves namespaces whose pid is dead,
which the next run deletes (`remove_leftovers`). Commands run as root through
``ip netns exec NAME ...``, which execs the command (same pid), so a launcher's process
handling applies to what it starts there.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass

__all__ = [
    "INTERFACE",
    "PREFIX",
    "SUBNET",
    "UNSHARE",
    "Nodes",
    "cannot_unshare",
    "check_isolation",
    "nodes",
    "remove_leftovers",
    "unavailable",
]

#: namespace names start with this, then the pid of the process that made them
PREFIX = "mtnet"
#: the /24 the nodes share (private to the namespaces: it cannot clash with the host's)
SUBNET = "10.231.7"
#: the name of each node's veth end (the same in every node, as eth0 on real nodes)
INTERFACE = "mt0"
_HUB = "hub"
_BRIDGE = "br0"
_NAME = re.compile(rf"{PREFIX}(\d+)-\w+")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` (bounded: iproute2 never waits on the network)."""
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


#: util-linux's unshare: ``UNSHARE --net CMD`` runs CMD in a network namespace of its own
#: (a loopback of its own, as another node's), without `nodes`' links
UNSHARE = "/usr/bin/unshare"


def cannot_unshare() -> str | None:
    """Why ``unshare --net`` cannot run a command in a network namespace of its own here
    (the test skips with it), or None: tried once with ``true``."""
    if not sys.platform.startswith("linux") or not os.path.exists(UNSHARE):
        return "needs Linux and unshare (util-linux) for a network namespace"
    probe = subprocess.run([UNSHARE, "--net", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        return f"cannot make a network namespace (needs root): {probe.stderr.decode()}"
    return None


def unavailable() -> str | None:
    """Why namespaces cannot be made here (the test skips with it), or None.

    Tries what `nodes` needs, on a probe namespace: ``ip netns add`` (root, or
    CAP_SYS_ADMIN and a writable /run/netns) and a veth pair (CAP_NET_ADMIN).
    """
    if not sys.platform.startswith("linux"):
        return "network namespaces are a Linux feature"
    if shutil.which("ip") is None:
        return "needs the `ip` command of iproute2"
    if os.geteuid() != 0:
        return "`ip netns add` needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        made = _ip("netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"`ip netns add` failed: {made.stderr.strip()}"
        pair = ["link", "add", "name", "a0", "type", "veth", "peer", "name", "b0"]
        veth = _ip("-n", probe, *pair, check=False)
        if veth.returncode != 0:
            return f"cannot make a veth pair in a namespace: {veth.stderr.strip()}"
        return None
    finally:
        _ip("netns", "del", probe, check=False)


@dataclass(frozen=True)
class Nodes:
    """The namespaces made by `nodes`: per role, its namespace and its address."""

    namespaces: dict[str, str]
    addresses: dict[str, str]

    def argv(self, role: str, command: Sequence[str]) -> list[str]:
        """`command` run in `role`'s namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespaces[role], *command]

    def netns_id(self, role: str) -> str:
        """`role`'s namespace as ``/proc/PID/ns/net`` of a process in it reads."""
        return f"net:[{os.stat(f'/run/netns/{self.namespaces[role]}').st_ino}]"

    def pids(self) -> dict[str, list[int]]:
        """The processes alive in each namespace, by role."""
        return {role: _pids(ns) for role, ns in self.namespaces.items()}


def _pids(namespace: str) -> list[int]:
    out = _ip("netns", "pids", namespace, check=False).stdout
    return [int(p) for p in out.split()]


def _delete(namespace: str) -> None:
    """Kill what still runs in `namespace` (only this test's processes run there),
    then delete it; its veth ends go with it, and their peers with them."""
    for pid in _pids(namespace):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _ip("netns", "del", namespace, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone; return their names."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    gone = []
    for line in listed:
        name = line.split(" ")[0]
        match = _NAME.fullmatch(name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            _delete(name)
            gone.append(name)
    return gone


@contextmanager
def nodes(roles: Sequence[str] = ("node0", "node1", "sims")) -> Iterator[Nodes]:
    """Namespaces for `roles` on one bridge (the module docstring); deleted on exit,
    whatever happened, with every process still running in them.

    Raises:
        subprocess.CalledProcessError: an ``ip`` command failed (call `unavailable`
            first to skip where namespaces cannot be made).
    """
    if not 0 < len(roles) < 254:
        raise ValueError(f"between 1 and 253 roles, not {len(roles)}")
    base = f"{PREFIX}{os.getpid()}-"
    hub = base + _HUB
    made: list[str] = []
    try:
        for ns in (hub, *(base + role for role in roles)):
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", hub, "link", "add", _BRIDGE, "type", "bridge")
        _ip("-n", hub, "link", "set", _BRIDGE, "up")
        addresses = {}
        for i, role in enumerate(roles):
            ns, port, address = base + role, f"p{i}", f"{SUBNET}.{i + 1}"
            # both ends made where they live: no name ever exists in the host's namespace
            _ip("-n", hub, "link", "add", "name", port, "type", "veth", "peer", "name", INTERFACE,
                "netns", ns)  # fmt: skip
            _ip("-n", hub, "link", "set", port, "master", _BRIDGE, "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", INTERFACE)
            _ip("-n", ns, "link", "set", INTERFACE, "up")
            addresses[role] = address
        yield Nodes({role: base + role for role in roles}, addresses)
    finally:
        for ns in reversed(made):
            _delete(ns)


_PROBE = r"""
import socket, sys
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "listen":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (a probe before it: TIME_WAIT)
    s.bind(("0.0.0.0", port))
    s.listen()
    print("ready", flush=True)
    s.settimeout(20)
    while True:
        c, _ = s.accept()
        c.sendall(b"ok")
        c.close()
try:
    c = socket.create_connection((host, port), timeout=5)
    print(c.recv(2).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


def check_isolation(net: Nodes, server: str, client: str, port: int = 47001) -> dict[str, str]:
    """Listen on every address of `server`'s namespace and connect from `client`'s to
    its address and to 127.0.0.1; return ``{"address": "ok" | error name, "loopback":
    ...}``. On nodes that are separate machines: ``{"address": "ok", "loopback":
    "ConnectionRefusedError"}``."""
    listener = subprocess.Popen(
        net.argv(server, [sys.executable, "-c", _PROBE, "listen", "", str(port)]),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert listener.stdout is not None
        ready = listener.stdout.readline().strip()  # "" if it died
        if ready != "ready":
            raise RuntimeError(f"the probe listener in {server} did not start: {ready!r}")
        out = {}
        for name, host in (("address", net.addresses[server]), ("loopback", "127.0.0.1")):
            probe = [sys.executable, "-c", _PROBE, "connect", host, str(port)]
            done = subprocess.run(
                net.argv(client, probe), capture_output=True, text=True, timeout=20
            )
            out[name] = done.stdout.strip() or done.stderr.strip()
        return out
    finally:
        listener.kill()
        listener.wait(10)
