"""A checkpoint named by path that does not verify (or fails to load) proposes the
other checkpoints to resume from: only those that verify, as `latest` would take them,
or says that none does (trial 6 F3: the error proposed checkpoints damaged alike)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint.errors import CheckpointError

pytestmark = pytest.mark.timeout(120)


def run(out: Path, **overrides: Any) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(out), report_to="none", disable_progress_bar=True, batch_size=8,
        buffer="fifo", buffer_size=64, watermark=8, stop_sync_steps=1, seed=3, **overrides,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(400), process_sample=xy,
    )  # fmt: skip
    trainer.train()
    return trainer


def flip_a_byte(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    file.write_bytes(bytes(data))


def test_only_the_checkpoints_that_verify_are_proposed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(out, max_steps=30, save_steps=10)
    root = out / "checkpoints"
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [
        f"checkpoint-{n}" for n in (10, 20, 30)
    ]
    flip_a_byte(root / "checkpoint-30" / "model.safetensors")  # the one named
    (root / "checkpoint-20" / "rank_9").mkdir()  # fails as the named one's neighbours did
    (root / "checkpoint-20" / "rank_9" / "x.txt").write_text("a hook's")
    with pytest.raises(CheckpointError) as caught:
        run(out, max_steps=40, resume_from_checkpoint=str(root / "checkpoint-30"))
    said = str(caught.value)
    assert "does not verify" in said, said
    assert said.endswith(f": {root / 'checkpoint-10'}"), said
    assert str(root / "checkpoint-20") not in said, said

    flip_a_byte(root / "checkpoint-10" / "optimizer.bin")  # now none verifies
    with pytest.raises(CheckpointError) as caught:
        run(out, max_steps=40, resume_from_checkpoint=str(root / "checkpoint-30"))
    said = str(caught.value)
    assert "resume from another one" not in said, said
    assert f"none of the other checkpoints under {root} verifies" in said, said
