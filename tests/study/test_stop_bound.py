"""How long a source may take to stop (`Source.stop_bound`), which the trainer ranks'
last meeting waits beyond its own bound (`exit_meeting.meet_timeout`): a study's is its
last simulations' `STOP_WAIT`, its account's wait for the other ranks' last counts
(`FINAL_WAIT`) and its backend's stop with the study's `kill_grace`
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
from melissa_trainer.sources.iterable import as_source
from melissa_trainer.stream.rank_activity import FINAL_WAIT
from melissa_trainer.study.study_stop import STOP_WAIT
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
    assert study(LocalBackend(), 7.0).stop_bound() == STOP_WAIT + FINAL_WAIT + 7.0
    long = study(LocalBackend(), 300.0)
    assert long.stop_bound() == STOP_WAIT + FINAL_WAIT + 300.0
    # the meeting waits its own bound beyond it
    assert meet_timeout(long) == MEET_TIMEOUT + STOP_WAIT + FINAL_WAIT + 300.0


@pytest.mark.timeout(30)
def test_a_source_of_samples_stops_at_once() -> None:
    source = as_source([{"x": 1}])
    assert source.stop_bound() == 0.0
    assert meet_timeout(source) == MEET_TIMEOUT


class Failing:
    """A user's source whose `stop_bound` override is wrong."""

    def __init__(self, bound: object) -> None:
        self.bound = bound

    def stop_bound(self) -> object:
        if isinstance(self.bound, Exception):
            raise self.bound
        return self.bound


@pytest.mark.timeout(30)
@pytest.mark.parametrize("bound", [KeyError("kill_grace"), float("nan"), float("inf"), "soon"])
def test_a_stop_bound_that_fails_is_said_and_counts_nothing(
    bound: object, caplog: pytest.LogCaptureFixture
) -> None:
    """Computed in the trainer's ``finally``: an error there would be raised over the
    run's own and skip its clean-up (the signal handlers, the output directory's hold)."""
    with caplog.at_level("WARNING", logger="melissa_trainer.trainer.exit_meeting"):
        assert meet_timeout(Failing(bound)) == MEET_TIMEOUT
    assert "Failing.stop_bound()" in caplog.text, caplog.text


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
    assert study(backend, 5.0).stop_bound() == STOP_WAIT + FINAL_WAIT + 5.0 + FORCE_WAIT + 40.0
