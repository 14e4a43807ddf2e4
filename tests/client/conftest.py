"""Fixtures of the client tests: `external`, the rendezvous of a solver started by hand;
`context` (also `zctx`), a ZeroMQ context of the test's own, and `receiver`, a PULL socket
bound on it (client_runs.Receiver); `_clean_environment`, none of the client's endpoint
variables set (test_client_*.py use it, by ``pytestmark = pytest.mark.usefixtures(...)``);
`follow_rendezvous`, the rendezvous of a client that follows restarted receivers;
`short_receipt_rounds`, a close's RECEIPT_QUERY rounds of 0.6 s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from client_runs import Receiver

from melissa_trainer.client import ENV_ENDPOINTS, ENV_RENDEZVOUS, ENV_SIMULATION_ID, follow


@pytest.fixture
def external(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A solver started by hand (external mode): its endpoints come from the rendezvous
    `tmp_path` (``MELISSA_TRAINER_RENDEZVOUS``), none of the launcher's variables set."""
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def context() -> Iterator[zmq.Context]:
    """A ZeroMQ context of the test's own, destroyed after it (its sockets closed)."""
    ctx = zmq.Context()
    try:
        yield ctx
    finally:
        ctx.destroy(linger=0)


@pytest.fixture
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SIMULATION_ID, ENV_ENDPOINTS, ENV_RENDEZVOUS):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def zctx(context: zmq.Context) -> zmq.Context:
    """`context`, by the name the split test_client_*.py files use."""
    return context


@pytest.fixture
def receiver(zctx: zmq.Context) -> Receiver:
    return Receiver(zctx)


@pytest.fixture
def follow_rendezvous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An external-mode client's rendezvous directory (not created: the receivers write
    it), no endpoints or run id given, and every send looking at it (`follow.
    CHECK_INTERVAL` 0: a restart is noticed at the next send, deterministically)."""
    where = tmp_path / "rendezvous"
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(where))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(follow, "CHECK_INTERVAL", 0.0)
    return where


@pytest.fixture
def short_receipt_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """An external-mode close's RECEIPT_QUERY rounds of 0.6 s, not 2 s
    (`receipts.ROUND_TIMEOUT`), for the tests whose receiver never answers (stopped, or
    its follow endpoint refused): such a close looks for the receiver's connection only
    between rounds, so a round was the least such a test waited, whatever its
    ``disconnected_timeout``. Still over the receivers' hold of a question
    (`follow_server.RECEIPT_HOLD`, 0.5 s), so a live receiver's "not yet" still comes
    within a round."""
    from melissa_trainer.client import receipts

    monkeypatch.setattr(receipts, "ROUND_TIMEOUT", 0.6)
