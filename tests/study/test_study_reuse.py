"""A trainer refused its output directory (another trainer holds it, `OutputDirLocked`)
leaves its `Study` as it was: the stream's rendezvous is set by `Study.configure`, once
the directory is locked for this run, not by `Study.note_output_dir` (the trainer's
first call, before the claim: provisional, for a failed set-up's rewrite alone). (The
refused trainer rewrites none of the holder's records either:
tests/trainer/test_restart_fails_study_rendezvous.py.)

Found by review hrev11 (of 3914d6af..00d3489d): `note_output_dir` (6aa7644b) filled in
the rendezvous before the claim, and `StreamSource.fill_in` sets a field once, so a
retry of the same study with another ``output_dir`` (the refusal's own advice) published
its receivers, and read its records, in the other trainer's rendezvous folder.

The oracle: the second trainer's ``output_dir``, which the test chose. The holder: a
flock on the lock file, held by the test (refused at once, `output_lock`).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from stop_records import record_trainer

from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.samplers import make_sampler
from melissa_trainer.study.study import Study
from melissa_trainer.trainer.lock_holder import LOCK_FILE, OutputDirLocked

pytestmark = pytest.mark.timeout(60)


@contextmanager
def held(output_dir: Path) -> Iterator[None]:
    """`output_dir`'s lock held as another trainer holds it (another open file
    description: refused like another process's)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    with open(output_dir / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def a_study() -> Study:
    return Study(Launcher(["true"], make_sampler("uniform", {"a": (0.0, 1.0)}, seed=0), 2))


def test_a_study_retried_in_another_output_dir_publishes_there(tmp_path: Path) -> None:
    study = a_study()
    with held(tmp_path / "out"):
        with pytest.raises(OutputDirLocked):
            record_trainer(tmp_path, study)  # (the same output_dir: refused)
        assert study.stream.config.rendezvous_dir is None  # (nothing fixed there)
        retry = tmp_path / "retry"
        retry.mkdir()
        record_trainer(retry, study)  # (its output_dir: retry/"out")
    rendezvous = study.stream.config.rendezvous_dir
    assert Path(str(rendezvous)) == retry / "out" / "rendezvous", rendezvous
