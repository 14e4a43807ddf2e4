"""Review hrev11 (of 3914d6af..00d3489d): `Study.note_output_dir` (hfix11, 6aa7644b),
the trainer's first call, fills in the stream's rendezvous (``{output_dir}/rendezvous``)
before the output directory is claimed, and `StreamSource.fill_in` sets a field once.

Before, `Study.configure` filled it in, after `claim_output_dir`: a trainer refused its
output directory (another trainer holds it, `OutputDirLocked`) left the study as it was.
Now that refused trainer fixes the study's rendezvous in the directory it was refused,
and a retry with the same study and another ``output_dir`` (the refusal's own advice:
choose another directory) publishes its receivers, and reads its records, in the other
trainer's rendezvous folder.

The oracle: the second trainer's ``output_dir``, which the test chose. The holder: a flock
on the lock file, held by the test (refused at once, `output_lock`). Reproduction only.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest
from stop_records import record_trainer

from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.samplers import make_sampler
from melissa_trainer.study.study import Study
from melissa_trainer.trainer.lock_holder import LOCK_FILE, OutputDirLocked

pytestmark = pytest.mark.timeout(60)


@pytest.mark.xfail(
    strict=True,
    reason="hrev11 F3: a trainer refused its output_dir (locked) fixes the study's "
    "rendezvous there (note_output_dir before the claim); a retry elsewhere keeps it",
)
def test_a_study_retried_in_another_output_dir_publishes_there(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    # (another holder's flock: another open file description, refused like another process's)
    with open(tmp_path / "out" / LOCK_FILE, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        _retry(tmp_path)


def _retry(tmp_path: Path) -> None:
    study = Study(Launcher(["true"], make_sampler("uniform", {"a": (0.0, 1.0)}, seed=0), 2))
    with pytest.raises(OutputDirLocked):
        record_trainer(tmp_path, study)  # (the same output_dir: refused)
    retry = tmp_path / "retry"
    retry.mkdir()
    record_trainer(retry, study)  # (its output_dir: retry/"out")
    rendezvous = study.stream.config.rendezvous_dir
    assert Path(str(rendezvous)) == retry / "out" / "rendezvous", rendezvous
