"""A loopback endpoint read from a rendezvous by a process that cannot reach it (another
machine, or another network namespace) is said at once (`stream.host_scope`,
`ReceiverUnreachable`), not after the client's 60 s as a receiver that never
answered. Before, a Slurm job on a compute node reading a trainer's 127.0.0.1 waited
its ``disconnected_timeout`` and said "start the trainer first" (the two-node Slurm
test shows it with real jobs: tests/launcher/backends/test_slurm_two_nodes.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import netns
import pytest

from melissa_trainer.stream import host_scope
from melissa_trainer.stream.endpoints import write_rendezvous
from melissa_trainer.stream.host_scope import HOST_KEY, SCOPE_KEY, out_of_reach

LOOPBACK = "tcp://127.0.0.1:5555"

linux = pytest.mark.skipif(sys.platform != "linux", reason="the scope is read from /proc")


@linux
def test_the_scope_is_the_boot_and_the_network_namespace() -> None:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    st = os.stat("/proc/self/ns/net")
    assert host_scope.loopback_scope() == f"{boot}/{st.st_dev}:{st.st_ino}"


@linux
def test_a_rendezvous_file_publishes_the_host_and_the_scope(tmp_path: Path) -> None:
    path = write_rendezvous(tmp_path, 0, 1, LOOPBACK)
    entry = json.loads(path.read_text())
    assert entry[HOST_KEY] == socket.gethostname()
    assert entry[SCOPE_KEY] == host_scope.loopback_scope()
    assert out_of_reach(LOOPBACK, entry, loopback=True) is None  # (this process: same scope)


def test_what_cannot_be_told_is_not_refused() -> None:
    mine = host_scope.loopback_scope()
    other = {SCOPE_KEY: "another-boot/1:2", HOST_KEY: "node7"}
    assert out_of_reach("tcp://10.0.0.1:5555", other, loopback=False) is None  # (reachable)
    assert out_of_reach(LOOPBACK, {}, loopback=True) is None  # (an older trainer's file)
    assert out_of_reach(LOOPBACK, {SCOPE_KEY: 3}, loopback=True) is None  # (not a scope)
    if mine is not None:
        assert out_of_reach(LOOPBACK, {SCOPE_KEY: mine}, loopback=True) is None


@linux
def test_another_machine_and_another_namespace_are_told_apart() -> None:
    mine = host_scope.loopback_scope()
    assert mine is not None
    boot, _, netns = mine.partition("/")
    machine = out_of_reach(LOOPBACK, {SCOPE_KEY: f"x{boot}/{netns}", HOST_KEY: "gpu01"}, True)
    assert machine is not None
    assert f"runs on host {socket.gethostname()!r}, another machine" in machine
    assert "loopback endpoint tcp://127.0.0.1:5555 (its host 'gpu01')" in machine
    assert "ReceiverConfig(bind='tcp://*:*')" in machine and "advertise_host" in machine
    container = out_of_reach(LOOPBACK, {SCOPE_KEY: f"{boot}/0:1", HOST_KEY: "gpu01"}, True)
    assert container is not None and "another network namespace" in container


CLIENT = """
import sys
from melissa_trainer.client import Client, ReceiverUnreachable
try:
    Client({"u": ((2,), "float32")}, simulation_id=0)
except ReceiverUnreachable as exc:
    print("UNREACHABLE", exc)
    sys.exit(3)
print("CONNECTED")
"""


@linux
@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_client_in_another_network_namespace_is_told_at_once(tmp_path: Path) -> None:
    """A real receiver's rendezvous read by a client in a network namespace of its own
    (``unshare --net``: a loopback of its own, as a compute node's): ReceiverUnreachable
    as the Client is made, before any connection attempt; the same client in this
    namespace connects."""
    unshare = netns.UNSHARE
    if (why := netns.cannot_unshare()) is not None:
        pytest.skip(why)
    from melissa_trainer.buffers import FIFOBuffer
    from melissa_trainer.stream.receiver import Receiver
    from melissa_trainer.stream.receiver_config import ReceiverConfig

    receiver = Receiver(FIFOBuffer(8), config=ReceiverConfig(rendezvous_dir=tmp_path / "rdv"))
    receiver.start()
    try:
        env = {**os.environ, "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rdv")}
        env.pop("MELISSA_TRAINER_ENDPOINTS", None)
        away = subprocess.run(
            [unshare, "--net", sys.executable, "-c", CLIENT],
            capture_output=True, text=True, timeout=50, env=env,
        )  # fmt: skip
        assert away.returncode == 3, (away.stdout, away.stderr[-2000:])
        assert f"rendezvous {tmp_path / 'rdv'}: the receiver published the loopback" in away.stdout
        assert "another network namespace" in away.stdout
        here = subprocess.run(
            [sys.executable, "-c", CLIENT], capture_output=True, text=True, timeout=50, env=env
        )
        assert here.returncode == 0 and "CONNECTED" in here.stdout, here.stderr[-2000:]
    finally:
        receiver.stop()


@linux
def test_an_ipc_endpoint_is_reached_from_any_namespace_of_its_machine() -> None:
    """A Unix socket is a file: another network namespace of the same machine reaches it
    (tried: a sender under ``unshare --net`` delivered to a receiver here); another
    machine does not."""
    mine = host_scope.loopback_scope()
    assert mine is not None
    boot, _, _ = mine.partition("/")
    ipc = "ipc:///tmp/melissa-receiver"
    assert out_of_reach(ipc, {SCOPE_KEY: f"{boot}/0:1", HOST_KEY: "here"}, True) is None
    elsewhere = out_of_reach(ipc, {SCOPE_KEY: f"x{boot}/0:1", HOST_KEY: "gpu01"}, True)
    assert elsewhere is not None and "another machine" in elsewhere


@linux
def test_a_host_name_resolved_to_loopback_here_is_said_out_of_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`tcp://*:*` publishes the trainer's host name; where the simulation's node resolves
    it to loopback (an /etc/hosts its nodes share, mapping the name to 127.0.0.1, as on
    the two-node test cluster) the client would wait its 60 s and say "start the trainer
    first" (seen in a user trial of the heat example): it is said at once, as a loopback
    endpoint is. A name resolved to an address others reach, a literal address, or the
    same scope is left alone."""
    mine = host_scope.loopback_scope()
    assert mine is not None
    boot, _, netns = mine.partition("/")
    table = {"trainer-node": ["127.0.0.1", "::1"], "gpu-login": ["127.0.1.1", "10.1.2.3"]}

    def resolve(name: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        if name not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in table[name]]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    other = {SCOPE_KEY: f"{boot}/x{netns}", HOST_KEY: "trainer-node"}
    why = out_of_reach("tcp://trainer-node:5555", other, loopback=False)
    assert why is not None
    assert "tcp://trainer-node:5555" in why and "127.0.0.1, ::1" in why, why
    assert "another network namespace" in why and "advertise_host='ADDRESS'" in why, why
    assert "--bind 'tcp://ADDRESS:*'" in why, why
    assert out_of_reach("tcp://gpu-login:5555", other, loopback=False) is None  # (reachable)
    assert out_of_reach("tcp://unknown-host:5555", other, loopback=False) is None
    assert out_of_reach("tcp://10.0.0.1:5555", other, loopback=False) is None
    same = {SCOPE_KEY: mine, HOST_KEY: "trainer-node"}
    assert out_of_reach("tcp://trainer-node:5555", same, loopback=False) is None
