"""Run by tests/checkpoint/test_resume_changes_ranks.py, on one rank (plain ``python``)
or under `accelerate launch` on two: a tiny run that draws random numbers (dropout, and
the buffer's draws when ``--buffer reservoir``), to be resumed with changed settings.

With ``--patience P`` it validates (``--eval_steps``) on a fixed set with a metric of its
own, ``score`` (1 / (1 + the set's MSE), greater is better), and stops early
(`EarlyStoppingHook(P)`). At the end each rank writes OUT/{--tag}end_rank_R.json: its
final `TrainerState` figures and the warnings it logged (``melissa_trainer``'s logger,
WARNING and above), which tell which rank said what.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    EarlyStoppingHook,
    Hook,
    OnlineTrainer,
    TrainingArguments,
)


@dataclass
class ScriptArgs:
    tag: str = ""  # prefix of the result files
    patience: int = 0  # EarlyStoppingHook's (with the score metric); 0: no validation


class Score(Hook):
    """A metric of its own, greater is better: 1 / (1 + the validation set's MSE)."""

    eval_keys = frozenset({"score"})

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        total = 0.0
        with torch.no_grad():
            for sample in trainer.eval_dataset:
                x, y = xy(sample)
                total += float(((trainer.model(x.unsqueeze(0)).squeeze(0) - y) ** 2).sum())
        return {"score": 1.0 / (1.0 + total / len(trainer.eval_dataset))}


class Said(logging.StreamHandler):  # type: ignore[type-arg]
    """Prints the records it handles to stderr, as Python's last-resort handler would
    (which a handler of ours turns off), and keeps their messages."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setLevel(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        super().emit(record)


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    said = Said()
    logging.getLogger("melissa_trainer").addHandler(said)
    model = small_model(0, dropout=0.3)
    extra: dict[str, Any] = {}
    if opts.patience:
        extra = {
            "eval_dataset": list(linear_samples(12, 5)),
            "hooks": [Score(), EarlyStoppingHook(opts.patience)],
        }
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        # (each rank its own samples, the same on every launch)
        train_source=lambda rank, world: linear_samples(400, seed=3 + rank),
        process_sample=xy,
        **extra,
    )
    state = trainer.train()
    result = {
        "world_size": trainer.num_processes,
        "global_step": state.global_step,
        "best_metric": state.best_metric,
        "best_step": state.best_step,
        "validations_since_best": state.validations_since_best,
        "warnings": said.messages,
    }
    rank = int(os.environ.get("RANK", "0"))
    (Path(args.output_dir) / f"{opts.tag}end_rank_{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
