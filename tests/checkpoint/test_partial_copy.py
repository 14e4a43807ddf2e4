"""A checkpoint with ``format.json`` but no manifest is damaged, not an earlier
version's (`checkpoint.manifest.read`): ``format.json`` came after manifests, so the
version that wrote it wrote a manifest too. A copy cut short (rsync killed, a sync tool
in progress) leaves such a checkpoint, other files missing with the manifest.

Before, it was taken unverified, as a checkpoint of before manifests: with
``rank_0/trainer_rank.json`` missing too, the loading did without it (a fallback for the
versions before it), and the resume went on from step 20 with the rank's samples_seen
lost, nothing said but "unverified". Now ``latest`` skips it with one warning and
resumes exactly from the checkpoint before it; the same checkpoint without
``format.json`` (as a version before manifests wrote it) is still taken unverified
(tests/checkpoint/test_checkpoint_verify.py)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run

from melissa_trainer.checkpoint import manifest

pytestmark = pytest.mark.timeout(180)

BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}


def test_latest_skips_a_partial_copy_without_its_manifest(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    full = run(dict(BASE, output_dir=str(tmp_path_factory.mktemp("full"))))
    run(dict(BASE, output_dir=str(tmp_path / "out"), max_steps=20))
    copied = tmp_path / "out" / "checkpoints" / "checkpoint-20"
    for file in (manifest.MANIFEST, "rank_0/trainer_rank.json"):  # (not copied yet)
        (copied / file).unlink()
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = run(dict(BASE, output_dir=str(tmp_path / "out"), resume_from_checkpoint="latest"))
    # before: resumed from checkpoint-20 (first step 21), samples_seen lost
    assert resumed["losses"] == [(s, loss) for s, loss in full["losses"] if s > 10]
    for key in ("params", "global_step", "samples_seen", "total_samples_seen", "buffer"):
        assert resumed[key] == full[key], key
    said = [r.getMessage() for r in caplog.records if "a partial copy" in r.getMessage()]
    assert len(said) == 1 and f"{copied / manifest.MANIFEST}: missing, though" in said[0], said
