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


def test_a_study_reused_by_a_second_trainer_publishes_in_its_output_dir(tmp_path: Path) -> None:
    """A study whose first trainer claimed its ``output_dir`` (configured: its rendezvous
    filled in) and was let go untrained, given to a second trainer in another
    ``output_dir``: the second trainer's rendezvous and run id are its own. Failed
    before (task hrestart4): `StreamSource.fill_in` sets a field once, so the stream
    kept the first trainer's rendezvous folder (the second trainer's solvers were told
    to look there) and run id."""
    study = a_study()
    first = record_trainer(tmp_path / "first", study)
    first._output_hold.release()  # (let go untrained: its output_dir is free again)
    filled = Path(str(study.stream.config.rendezvous_dir))
    assert filled == tmp_path / "first" / "out" / "rendezvous", filled
    second = record_trainer(tmp_path / "second", study)
    try:
        rendezvous = study.stream.config.rendezvous_dir
        assert Path(str(rendezvous)) == tmp_path / "second" / "out" / "rendezvous", rendezvous
        assert study.stream.config.run_id == second.run_id != first.run_id
    finally:
        second._output_hold.release()


def test_a_rendezvous_the_user_named_is_kept_by_a_second_trainer(tmp_path: Path) -> None:
    """What the user gave (`ReceiverConfig`'s rendezvous and run id) is never replaced:
    only what the study and the trainer filled in is the trainer's to change."""
    from melissa_trainer.stream.receiver_config import ReceiverConfig
    from melissa_trainer.stream.stream_source import StreamSource

    mine = tmp_path / "mine"
    config = ReceiverConfig(rendezvous_dir=str(mine), run_id="0123456789abcdef")
    launcher = Launcher(["true"], make_sampler("uniform", {"a": (0.0, 1.0)}, seed=0), 2)
    study = Study(launcher, StreamSource(config))
    for name in ("first", "second"):
        trainer = record_trainer(tmp_path / name, study)
        trainer._output_hold.release()
        assert Path(str(study.stream.config.rendezvous_dir)) == mine
        assert study.stream.config.run_id == "0123456789abcdef"
