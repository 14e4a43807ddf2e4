"""How long a source may take to stop (`Source.stop_bound`), which the trainer ranks'
last meeting waits beyond its own bound (`exit_meeting.meet_timeout`): a study's is its
last simulations' `STOP_WAIT` and its backend's stop with the study's `kill_grace`
(`Backend.stop_bound`: one grace for all the jobs; Slurm adds the forced end's wait and
one `controller_wait`). The meeting's wait itself: tests/study/test_failed_study_slow_rank.py."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from melissa_trainer import StreamSource, Study
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.backends.slurm.batch import FORCE_WAIT
from melissa_trainer.sources.source import as_source
from melissa_trainer.study.study import STOP_WAIT
from melissa_trainer.trainer.exit_meeting import MEET_TIMEOUT, meet_timeout


def study(backend: object, kill_grace: float) -> Study:
    launcher = Launcher(
        [sys.executable, "-c", "pass"],
        [{"a": 0.0}],
        1,
        backend=backend,  # type: ignore[arg-type]
        tuning=LauncherTuning(kill_grace=kill_grace),
    )
    return Study(launcher, StreamSource())


@pytest.mark.timeout(30)
def test_a_study_may_take_its_kill_grace_and_its_last_exits_wait_to_stop() -> None:
    assert study(LocalBackend(), 7.0).stop_bound() == STOP_WAIT + 7.0
    assert study(LocalBackend(), 300.0).stop_bound() == STOP_WAIT + 300.0
    # the meeting waits its own bound beyond it
    assert meet_timeout(STOP_WAIT + 300.0) == MEET_TIMEOUT + STOP_WAIT + 300.0


@pytest.mark.timeout(30)
def test_a_source_of_samples_stops_at_once() -> None:
    assert as_source([{"x": 1}]).stop_bound() == 0.0
    assert meet_timeout(0.0) == MEET_TIMEOUT


@pytest.mark.timeout(30)
def test_a_slurm_study_may_also_wait_for_its_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"  # (the backend looks its commands up at construction)
    bin_dir.mkdir()
    for name in ("sbatch", "squeue", "scancel"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    backend = SlurmBackend(controller_wait=40.0, lease_timeout=None)
    assert study(backend, 5.0).stop_bound() == STOP_WAIT + 5.0 + FORCE_WAIT + 40.0
