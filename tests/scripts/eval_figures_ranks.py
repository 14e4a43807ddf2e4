"""Run on two ranks by tests/hooks/test_eval_figures_ranks.py: a hook's `eval_figures`
computes a figure from its rank's share of the validation set and reduces it over the
ranks (`trainer.accelerator.reduce`, a collective every rank calls there), declared as
`metric_for_best_model`; each rank writes its validations' entries of
``state.log_history`` and its best metric to ``OUTPUT_DIR/eval_<rank>.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402


class SharedCount(Hook):
    """The number of validation samples, each rank counting its share (every other one)
    and the shares summed over the ranks; and a figure that differs per rank before the
    reduction (the sum of the squared targets of its share)."""

    eval_keys = frozenset({"targets_sq"})

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        acc = trainer.accelerator
        mine = range(acc.process_index, len(trainer.eval_dataset), acc.num_processes)
        sq = sum(float((xy(trainer.eval_dataset[i])[1] ** 2).sum()) for i in mine)
        both = acc.reduce(torch.tensor([float(len(mine)), sq], dtype=torch.float64), "sum")
        return {"counted": float(both[0]), "targets_sq": float(both[1])}


def main() -> None:
    args = TrainingArguments(
        output_dir=sys.argv[1], batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        max_steps=6, eval_steps=3, metric_for_best_model="targets_sq", report_to="none",
        disable_progress_bar=True, save_at_end=False,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(400, seed=rank)),
        process_sample=xy, eval_dataset=list(linear_samples(11, seed=7)),
        hooks=[SharedCount()],
    )  # fmt: skip
    state = trainer.train()
    evals = [h for h in state.log_history if "eval_loss" in h]
    out = Path(sys.argv[1]) / f"eval_{trainer.process_index}.json"
    out.write_text(json.dumps({"evals": evals, "best": state.best_metric}))


if __name__ == "__main__":
    main()
