"""Fixtures of the client tests: `external`, the rendezvous of a solver started by hand."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def external(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A solver started by hand (external mode): its endpoints come from the rendezvous
    `tmp_path` (``MELISSA_TRAINER_RENDEZVOUS``), none of the launcher's variables set."""
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path
