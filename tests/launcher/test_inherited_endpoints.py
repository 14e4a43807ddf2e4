"""Severity MEDIUM. A user trial (trial htrial9): ``MELISSA_TRAINER_ENDPOINTS`` left in
the shell from running a solver by hand, then the trainer started there. Every launched
simulation inherited it, sent to ``tcp://localhost:5599`` instead of the study's
rendezvous, and failed at its close after the client's 60 s; the study stopped after 4
attempts and 2.5 minutes, and no line named the variable. The launcher now says so, at
its start, in a WARNING that names the variable, its value and both fixes; a value given
in ``Launcher(env=...)`` is meant and is not warned about.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.inherited_env import inherited_endpoints

STALE = "tcp://localhost:5599"


def started(tmp_path: Path, env: dict[str, str] | None = None) -> None:
    """A one-simulation launcher started and stopped at once (its job exits 0)."""
    launcher = Launcher(
        [sys.executable, "-c", "pass"],
        UniformSampler({"x": (0.0, 1.0)}, seed=0),
        1,
        env=env,
        log_dir=tmp_path / "logs",
        tuning=LauncherTuning(poll_interval=0.02, kill_grace=2.0),
    )
    launcher.start(tmp_path / "rendezvous")
    launcher.stop()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_an_inherited_endpoint_is_named_at_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MELISSA_TRAINER_ENDPOINTS", STALE)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        started(tmp_path)
    said = [r.getMessage() for r in caplog.records if "MELISSA_TRAINER_ENDPOINTS" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert f"MELISSA_TRAINER_ENDPOINTS='{STALE}' is set in this process's environment" in said[0]
    assert str(tmp_path / "rendezvous") in said[0]
    assert "unset MELISSA_TRAINER_ENDPOINTS" in said[0]
    assert "Launcher(env={'MELISSA_TRAINER_ENDPOINTS': ...})" in said[0]


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_an_unset_endpoint_is_not_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        started(tmp_path)
    assert not [r for r in caplog.records if "MELISSA_TRAINER_ENDPOINTS" in r.getMessage()]


@pytest.mark.timeout(30)
def test_endpoints_given_to_the_launcher_or_blank_are_not_warned_about() -> None:
    given = {"MELISSA_TRAINER_ENDPOINTS": STALE}
    assert inherited_endpoints(given, given, "r") is None
    assert inherited_endpoints({}, {"MELISSA_TRAINER_ENDPOINTS": "  "}, "r") is None
    assert inherited_endpoints({}, given, "r") is not None
