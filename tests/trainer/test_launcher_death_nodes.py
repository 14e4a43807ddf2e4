"""A stop's cause on several nodes (`trainer.stop_cause`): the launcher's death and a
signal name their node (``GROUP_RANK``, torch elastic's node rank), so that node 0's
lines do not send its user looking for node 1's pid. The whole path, two nodes in
network namespaces, is test_multinode_launcher_death.py."""

from __future__ import annotations

import os
import signal

import pytest

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.trainer.preempted import Preempted
from melissa_trainer.trainer.preemption import PreemptionHandler
from melissa_trainer.trainer.stop_asked import stop_words
from melissa_trainer.trainer.stop_cause import StopCause, launcher_node

pytestmark = pytest.mark.timeout(30)

#: node 1's launcher, killed
GONE_1 = StopCause(signal.SIGTERM, 4242, "accelerate launch", 1)


def _nodes(monkeypatch: pytest.MonkeyPatch, node: int, world: int, local: int) -> None:
    """The environment torch elastic gives a worker of node `node`."""
    for key, value in (("GROUP_RANK", node), ("WORLD_SIZE", world), ("LOCAL_WORLD_SIZE", local)):
        monkeypatch.setenv(key, str(value))


@pytest.mark.parametrize(
    "cause",
    [
        GONE_1,
        StopCause(signal.SIGTERM, 4242, "accelerate launch", 0),  # node 0: not "no node"
        StopCause(signal.SIGTERM, 4_194_304, "torchrun", 65_534),  # pid_max, the last node
        StopCause(signal.SIGINT, node=3),
    ],
)
def test_a_nodes_cause_survives_its_code(cause: StopCause) -> None:
    assert StopCause.of(cause.code) == cause
    assert StopCause.signal_of(cause.code) == cause.signum
    assert cause.code < 2**63  # (an int64 in the ranks' agreement)


def test_every_line_names_the_node() -> None:
    assert str(GONE_1) == "the launcher (accelerate launch, pid 4242) of node 1 is gone"
    assert str(StopCause(signal.SIGTERM, node=1)) == "SIGTERM on node 1"
    assert stop_words(GONE_1.code, TrainerControl()) == f"stopped because {GONE_1}"
    said = str(Preempted(signal.SIGTERM, 5, "out/checkpoint-5", GONE_1))
    assert said.startswith(f"stopped at step 5 because {GONE_1}; checkpoint out/checkpoint-5")


def test_a_launchers_death_outranks_any_nodes_signal() -> None:
    """MAX over ranks: node 0's launcher killed while node 65534 got SIGTERM is said as
    the death (a new launch is needed), not as the signal."""
    codes = [StopCause(signal.SIGTERM, node=65_534).code, StopCause(signal.SIGTERM, 7, "", 0).code]
    assert StopCause.of(max(codes)) == StopCause(signal.SIGTERM, 7, "", 0)


def test_the_node_is_named_on_several_nodes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    assert launcher_node() is None  # no torch elastic
    _nodes(monkeypatch, 0, 4, 4)
    assert launcher_node() is None  # one node of four ranks: the pid is enough
    _nodes(monkeypatch, 1, 4, 2)
    assert launcher_node() == 1
    assert StopCause.launcher_gone(os.getppid()).node == 1
    _nodes(monkeypatch, 70_000, 140_000, 1)
    assert launcher_node() is None  # beyond what the code holds: not named


def test_a_signal_names_its_node_in_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """One node preempted: the cause the ranks agree on says where the SIGTERM came."""
    _nodes(monkeypatch, 1, 2, 1)
    handler = PreemptionHandler(parent=None).install()
    try:
        handler._on_signal(signal.SIGTERM)  # (as the watcher thread would)
        assert handler.cause == StopCause(signal.SIGTERM, node=1)
        assert handler.reason == "SIGTERM on node 1"
        assert StopCause.of(handler.code) == StopCause(signal.SIGTERM, node=1)
    finally:
        handler.restore()
