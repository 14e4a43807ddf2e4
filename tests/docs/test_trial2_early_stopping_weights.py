"""Early stopping ends with the last step's weights, and the best one's checkpoint may be
rotated away: what `docs/concepts/loop.md` says (a user trial, 2026-11-30, read "any of
them can choose the best model" as transformers' `load_best_model_at_end`, and found
the best step's checkpoint deleted by `--max_to_keep`).

The run is made so that the first validation is the best: the model trains towards
targets of +1 and is validated on targets of -1, so every step makes the validation
worse (the oracle: the validation loss (w.x + b + 1)^2 grows as training moves w.x + b
from 0 towards 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from melissa_trainer import OnlineTrainer, TrainingArguments

PAGE = Path(__file__).parents[2] / "docs" / "concepts" / "loop.md"


def sample(target: float) -> dict[str, np.ndarray]:
    return {"x": np.ones(2, np.float32), "y": np.full(1, target, np.float32)}


@pytest.mark.timeout(120)
def test_early_stopping_keeps_the_last_weights_not_the_best(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 1)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        report_to="none",
        disable_progress_bar=True,
        batch_size=2,
        watermark=2,
        eval_steps=1,
        save_steps=1,
        max_to_keep=1,
        early_stopping_patience=2,
        stop_sync_steps=2,
        max_steps=50,
    )
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), 0.05),
        train_source=[sample(1.0)] * 400,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        eval_dataset=[sample(-1.0)] * 2,
    )
    trainer.train()
    state = trainer.state
    assert state.best_step == 1 and trainer.ended_by is not None
    assert "early stopping" in trainer.ended_by
    assert state.global_step > state.best_step
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.is_dir())
    assert kept == [f"checkpoint-{state.global_step}"]  # the best step's is gone
    prediction = float(model(torch.ones(1, 2)).item())
    assert prediction > 0.1  # the last weights, moved towards +1: not the best (0)


def test_the_page_says_so() -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "ends with the weights of its last step" in text
    assert "load_best_model_at_end" in text
