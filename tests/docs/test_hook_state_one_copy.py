"""docs/how-to/hooks.md, "State": a hook's state is one copy in a checkpoint, the main
rank's (``hooks.json``, a `Scope.GLOBAL` part): only rank 0's ``state_dict`` is called
at a save, and every rank's ``load_state_dict`` gets that state at a resume. A user's
trial (2 gloo ranks) checked that its hooks' state survives an exact resume (it does):
a state that differs between ranks comes back as rank 0's on every rank, without a word,
which the page did not say. Here one process plays a rank that is not the main one
(`is_main_process` False)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.checkpoint import registry  # noqa: E402
from melissa_trainer.common.checkpoint_names import latest_checkpoint  # noqa: E402
from melissa_trainer.hooks.base import STATE_FILE  # noqa: E402

pytestmark = pytest.mark.timeout(120)


class PerRank(Hook):
    """A figure of this rank's own (its steps seen), kept in the hook's state."""

    def __init__(self, mine: float) -> None:
        self.mine, self.saved, self.loaded = mine, 0, None

    def state_dict(self) -> dict[str, Any]:
        self.saved += 1
        return {"mine": self.mine}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loaded = state


def make(out: Path, hook: PerRank) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(out), batch_size=4, buffer="fifo", buffer_size=16, watermark=4,
        report_to="none", disable_progress_bar=True, stop_sync_steps=2, max_steps=2,
    )  # fmt: skip
    model = small_model(0)
    return OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(64, seed=1), process_sample=xy,
        hooks=[hook],
    )  # fmt: skip


def test_only_the_main_ranks_state_is_saved_and_every_rank_loads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = PerRank(mine=0.0)
    make(tmp_path / "out", main).train()  # its checkpoint at the end: rank 0's state
    path = latest_checkpoint(tmp_path / "out" / "checkpoints")
    assert path is not None
    assert json.loads((path / STATE_FILE).read_text())["PerRank"] == {"mine": 0.0}

    other = PerRank(mine=1.0)  # another rank's figure
    trainer = make(tmp_path / "other", other)
    monkeypatch.setattr(OnlineTrainer, "is_main_process", property(lambda self: False))
    calls = other.saved  # (its state is checked once when the trainer is made)
    registry.write(trainer, tmp_path / "staging")
    assert other.saved == calls, "a rank that is not the main one saved its hook's state"
    assert not (tmp_path / "staging" / STATE_FILE).exists()
    trainer.load_checkpoint(str(path))
    assert other.loaded == {"mine": 0.0}  # rank 0's, not its own 1.0
