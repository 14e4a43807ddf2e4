"""Fixtures of the client tests: `external`, the rendezvous of a solver started by hand;
`context`, a ZeroMQ context of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq


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
