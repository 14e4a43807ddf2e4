"""A real two-node Slurm cluster on one machine: the single-node test cluster
(`slurm_cluster.SlurmCluster`) plus a second slurmd, node ``n1``, in its own network
namespace, joined to this host by a veth pair (this host ``HOST_ADDR``, n1
``NODE_ADDR`` on a /24 of 10.0.0.0/8 drawn per cluster).

What makes it a second machine for a study: a job that Slurm places on n1 runs in that
namespace, where 127.0.0.1 is n1's own loopback. A receiver bound to loopback on this
host is out of its reach, exactly as from a compute node of a real cluster, and it
reaches this host through its link (a default route to ``HOST_ADDR``: this host's own
addresses, as from a compute node; not its name where /etc/hosts maps it to 127.0.0.1,
as on this machine: the tests advertise ``HOST_ADDR``). The file
system, users and munge are shared (a cluster's shared file system and munge key), so
the rendezvous directory, the logs and the lease files are seen from both nodes.

Usage: ``with two_node_cluster() as cluster: ...`` in the xdist group "slurm" (one
cluster at a time). Skipped, with the reason, where it cannot start: the single-node
cluster's reasons, or no network namespace here (``ip netns add`` refused: no
CAP_NET_ADMIN, or no ``ip``/``nsenter``). `vanish` ends n1 as a machine that lost its
power: every process in its namespace SIGKILLed, its link down, no word to anyone.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import START_TIMEOUT, SlurmCluster, _path, one_node_cluster, skip_reason

__all__ = ["HERE_FEATURE", "OTHER_FEATURE", "TwoNodeCluster", "two_node_cluster"]

#: the second node's name in slurm.conf (and SLURMD_NODENAME of its jobs)
OTHER = "n1"
#: the nodes' features in slurm.conf: ``sbatch --batch=FEATURE`` runs a batch script on
#: this host or on n1 (otherwise Slurm's choice: n1, in the trials)
HERE_FEATURE, OTHER_FEATURE = "here", "other"
#: seconds without an answer from a slurmd before the controller marks its node DOWN and
#: ends its jobs NODE_FAIL (Slurm's default 300 s; the test cluster's `vanish` needs less)
SLURMD_TIMEOUT = 10
#: draws of the link's subnet, from the system's randomness (never `random`'s shared,
#: seedable state: see `TwoNodeCluster`)
_DRAW = random.SystemRandom()


def _ip(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ip ARGV``; with `check`, a failure is a RuntimeError quoting ip's stderr (a CI
    run's CalledProcessError said only the exit status)."""
    done = subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


class TwoNodeCluster(SlurmCluster):
    """`SlurmCluster` with a second node, `OTHER`, in a network namespace (see the module
    docstring). Attributes as `SlurmCluster`'s, plus `host_addr`/`node_addr` (this host's
    and n1's addresses on their link) and `netns` (the namespace's name)."""

    def __init__(self) -> None:
        super().__init__()
        # (the system's randomness: `random`'s state is shared and set by others in the
        # same process, e.g. a checkpoint's resume restores it; in one CI run a second
        # cluster's `ip netns add mt-...` was refused, likely a name drawn twice)
        tag = os.urandom(3).hex()
        self.netns = f"mt-{tag}"
        self._veth = f"mth{tag}"  # (this host's end; n1's is mtn<tag>: 15 characters at most)
        subnet = f"10.{_DRAW.randrange(64, 250)}.{_DRAW.randrange(1, 250)}"
        self.host_addr, self.node_addr = f"{subnet}.1", f"{subnet}.2"

    def start(self) -> None:
        """The link and namespace, then the daemons (the base class's, n1's slurmd spawned
        with them: `_write_conf`), then both nodes idle."""
        peer = f"mtn{self._veth[3:]}"
        _ip("netns", "add", self.netns)
        _ip("link", "add", self._veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", self.netns)
        _ip("addr", "add", f"{self.host_addr}/24", "dev", self._veth)
        _ip("link", "set", self._veth, "up")
        inside = ("netns", "exec", self.netns, "ip")
        _ip(*inside, "addr", "add", f"{self.node_addr}/24", "dev", peer)
        _ip(*inside, "link", "set", peer, "up")
        _ip(*inside, "link", "set", "lo", "up")
        # (this host's other addresses reached through it, as a cluster's nodes reach the
        # trainer's)
        _ip(*inside, "route", "add", "default", "via", self.host_addr)
        super().start()
        deadline = time.monotonic() + START_TIMEOUT
        while (states := self.node_states()).get(OTHER) != "idle":
            self._check_daemons()
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {OTHER} not idle after {START_TIMEOUT} s: {states}")
            time.sleep(0.1)

    def _write_conf(self, munge_socket: Path, node_line: str) -> None:
        super()._write_conf(munge_socket, node_line)
        text = self.conf.read_text()
        # the controller at this host's end of the link (n1 reaches nothing else); each
        # slurmd its own spool, pid and log file (%n: the node's name)
        text = text.replace(
            f"SlurmctldHost={self.node}\n", f"SlurmctldHost={self.node}({self.host_addr})\n"
        )
        for key in ("SlurmdSpoolDir", "SlurmdPidFile", "SlurmdLogFile"):
            text = re.sub(rf"^{key}=(.*)$", rf"{key}=\1.%n", text, flags=re.M)
        # (the features name each node for ``sbatch --batch=FEATURE``: the node a batch
        # job's script, a trainer, runs on)
        here = node_line.replace(
            f"NodeName={self.node}",
            f"NodeName={self.node} NodeAddr={self.host_addr} Features={HERE_FEATURE}",
        )
        other = node_line.replace(
            f"NodeName={self.node}",
            f"NodeName={OTHER} NodeAddr={self.node_addr} NodeHostname={OTHER} "
            f"Features={OTHER_FEATURE}",
        )
        text = text.replace(node_line, f"{here}\n{other}\nSlurmdTimeout={SLURMD_TIMEOUT}")
        text = text.replace(f"Nodes={self.node} ", f"Nodes={self.node},{OTHER} ")
        self.conf.write_text(text)
        for node in (self.node, OTHER):
            (self.root / f"spool.{node}").mkdir()
        self._spawn_n1()

    def node_states(self) -> dict[str, str]:
        """Each node's state as sinfo says it (``idle``, ``mixed``, ``down*``, ...)."""
        out = self.run(_path("sinfo"), "-h", "-N", "-p", self.partition, "-o", "%N %T")
        return dict(line.split() for line in out.splitlines() if line.strip())

    def netns_pids(self) -> list[int]:
        """The processes in n1's namespace (its slurmd, slurmstepd, the jobs)."""
        out = _ip("netns", "pids", self.netns, check=False).stdout
        return [int(pid) for pid in out.split()]

    def vanish(self) -> None:
        """n1 gone as a machine that lost its power: every process there SIGKILLed, its
        link down; nothing told to the controller or the jobs' peers."""
        _ip("link", "set", self._veth, "down")
        for pid in self.netns_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def revive(self) -> None:
        """n1 back after its power loss (a `vanish`): its link up and its slurmd started
        again, which registers with the controller; with ReturnToService=2 the node is
        then usable again (a job waiting for two nodes, a requeued one, can start)."""
        _ip("link", "set", self._veth, "up")
        self._spawn_n1()

    def _spawn_n1(self) -> None:
        # nsenter --net only: `ip netns exec` also remounts /sys, hiding the cgroup
        # file system slurmd needs
        argv = [_path("slurmd"), "-D", "-N", OTHER, "-f", str(self.conf)]
        self._spawn("slurmd_n1", ["nsenter", f"--net=/var/run/netns/{self.netns}", *argv])

    def stop(self) -> None:
        """The base class's stop, then n1's processes killed and its namespace and link
        removed, whatever happened."""
        try:
            super().stop()
        finally:
            for pid in self.netns_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _ip("netns", "del", self.netns, check=False)
            _ip("link", "del", self._veth, check=False)


def netns_skip_reason() -> str | None:
    """Why no network namespace can be made here, or None."""
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        return "no 'ip' or 'nsenter' (iproute2, util-linux): the second node needs them"
    name = f"mt-probe-{os.urandom(3).hex()}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"no network namespace here (ip netns add: {made.stderr.strip()})"
    _ip("netns", "del", name, check=False)
    return None


@contextlib.contextmanager
def two_node_cluster() -> Iterator[TwoNodeCluster]:
    """A two-node cluster started for the caller, stopped on leaving; skipped, with the
    reason, where none can start (see the module docstring)."""
    if skip_reason() is not None:
        with one_node_cluster():  # (skips or fails as the single-node cluster does)
            pass
    reason = netns_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    cluster = TwoNodeCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
