"""Run on two ranks by tests/trainer/test_rank_failure.py: rank 1 alone raises at step
3, where argv[2] says: ``loss`` (its loss function, inside the training step's forward,
before the step's DDP backward), ``step_end`` (a hook's ``on_step_end``) or ``log`` (a
hook's ``on_log``, at the log of step 3). Rank 0 trains on. "training ended" is printed
only if `train()` returned. Each rank writes the exception that ends it, its class and
exit status, to ``OUT/exit-<rank>.txt`` (a file, not the shared output).

    python rank_fails.py OUT WHERE
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402

WHERE = sys.argv[2] if len(sys.argv) > 2 else "loss"
#: the error rank 1 raises, first line and second (only the first travels)
ERROR = "rank one's own failure at step 3\nits second line"


class FailOnRankOne(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if WHERE == "step_end" and trainer.process_index == 1 and state.global_step == 3:
            raise ValueError(ERROR)

    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        if WHERE == "log" and trainer.process_index == 1 and state.global_step == 3:
            raise ValueError(ERROR)


def main() -> None:
    args = TrainingArguments(
        output_dir=sys.argv[1], batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, report_to="none", disable_progress_bar=True, save_at_end=False,
        logging_steps=3,
    )  # fmt: skip
    model = small_model()
    calls = [0]

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        if WHERE == "loss" and trainer.process_index == 1 and calls[0] == 3:
            raise ValueError(ERROR)
        return torch.nn.functional.mse_loss(out, target)

    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(4000, seed=rank)),
        process_sample=xy, hooks=[FailOnRankOne()], loss_fn=loss_fn,
    )  # fmt: skip
    trainer.train()
    print("training ended", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:
        said = f"{type(exc).__name__} {getattr(exc, 'code', 1)}\n"
        (Path(sys.argv[1]) / f"exit-{os.environ.get('RANK', '0')}.txt").write_text(said)
        raise
