"""A job still COMPLETING after its scancel is said with what that means (its node has to
confirm the end; one that vanished keeps it so until Slurm marks the node down), where
the warning gave the bare state (a two-node trial, tests/launcher/backends/
test_slurm_two_nodes.py: the launcher killed a silent simulation on a vanished node)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_slurm_stand_ins import fake_slurm  # noqa: F401 - the fixture

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm import batch


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_a_job_still_completing_after_its_kill_is_said_what_that_means(
    fake_slurm: Path,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batch, "FORCE_WAIT", 0.5)  # (the words are the point, not the wait)
    backend = SlurmBackend(script_dir=tmp_path / "scripts", poll_every=0)
    (fake_slurm / "state").write_text("4242|RUNNING\n")
    handle = backend.launch(Job("sim-2", ["/bin/sleep", "100"], cwd=tmp_path))
    assert backend.poll(handle) is None
    scancel = Path(str(fake_slurm).replace("fake", "bin")) / "scancel"
    scancel.write_text(  # (its node never confirms: the job stays COMPLETING)
        '#!/bin/bash\necho "$@" >> "$FAKE/scancel.calls"\necho "4242|COMPLETING" > "$FAKE/state"\n'
    )
    with caplog.at_level(logging.WARNING, "melissa_trainer.launcher"):
        backend.kill(handle, grace=0.5)
    [said] = [r.getMessage() for r in caplog.records if "after scancel" in r.getMessage()]
    assert said.startswith("sim-2 (Slurm job 4242) is still COMPLETING after scancel: Slurm")
    assert "sinfo -N: down* or not responding" in said and "SlurmdTimeout" in said, said
