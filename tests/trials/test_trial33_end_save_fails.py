"""User trial 33 ("ways to lose work"), severity MEDIUM.

What a user did: trained a study with ``--on_save_error continue`` (train on through a
checkpoint that fails: a long study on a shared cluster filesystem that fills up at
times), on a disk that was full when the run ended.

What happened: the save at the end (``save_at_end``) failed, and its error said
"Training goes on without this checkpoint (on_save_error='continue')", although training
had ended; the run then ended as any run does, exit status 0, and nothing at its end said
that the trained model and the study's progress since the last checkpoint were not on
disk. The model of the last steps is lost when the process exits; the words a user reads
say the opposite.

What was expected: the end save's failure said as such: training has ended, this
state is not saved, the latest checkpoint on disk (the one a resume starts from), and
the fix (make room and save: resume from it, or rerun); and the run fails (a non-zero
exit): `FinalCheckpointSaveError`, a `CheckpointSaveError`, whatever `on_save_error`
(`trainer.save_failure`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import CheckpointSaveError, OnlineTrainer, TrainingArguments

pytestmark = [pytest.mark.timeout(120), pytest.mark.e2e]  # e2e: it mounts a tmpfs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (writes past it fail with ENOSPC, as on a full disk); unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a small tmpfs, and mounting one needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"root, but cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_failed_save_at_the_end_says_the_final_state_is_not_saved(small_disk: Path) -> None:
    out = small_disk / "out"
    args = TrainingArguments(
        output_dir=str(out), batch_size=4, buffer="fifo", buffer_size=16, watermark=4,
        report_to="none", disable_progress_bar=True, stop_sync_steps=2, max_steps=4,
        save_seconds=None, on_save_error="continue",
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(64, seed=1),
        process_sample=xy,
    )
    # the disk full but for 8 KiB: the lock file fits, the end's checkpoint does not
    (small_disk / "filler").write_bytes(b"\0" * (shutil.disk_usage(small_disk).free - 8192))
    # the run fails (a non-zero exit), its error the end save's
    with pytest.raises(CheckpointSaveError) as info:
        trainer.train()
    assert trainer.state.global_step == 4
    said = str(info.value)
    assert "could not save checkpoint" in said, "the end save did not fail: the disk was not full"
    assert "No space left on device" in said
    assert "Training goes on" not in said  # it has ended
    assert "not saved" in said or "not on disk" in said  # the trained state is lost on exit
    assert "Training has ended at step 4" in said
    assert "no checkpoint is on disk: steps 1..4 are not saved" in said  # (no earlier one)
