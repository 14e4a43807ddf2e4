"""A trainer whose output directory is removed while it trains (a user's ``rm -rf``).

    python tests/scripts/remove_output_dir.py OUTPUT_DIR GO_FILE MODE

At the end of step 3 a hook removes OUTPUT_DIR (MODE ``replace``: and makes it again
with an empty ``trainer.lock``, as a second trainer would; ``preempt``: and sends
itself SIGTERM, as a scheduler's preemption), prints ``removed`` on
stdout, then waits for GO_FILE to exist (at most 120 s) before training goes on. The
trainer logs every step to TensorBoard (the default), so a write there follows at once.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402

out, go, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]


class Remove(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step != 3:
            return
        shutil.rmtree(out)
        if mode == "preempt":  # (a SIGTERM: the stop's checkpoint would be written there)
            os.kill(os.getpid(), signal.SIGTERM)
        if mode == "replace":
            out.mkdir()
            (out / "trainer.lock").write_text("")
        print("removed", flush=True)
        deadline = time.monotonic() + 120
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)


model = small_model()
args = TrainingArguments(
    output_dir=str(out), batch_size=4, disable_progress_bar=True, logging_steps=1, save_steps=5
)
trainer = OnlineTrainer(
    model,
    args,
    torch.optim.SGD(model.parameters(), lr=0.01),
    train_source=list(linear_samples(64)),
    process_sample=xy,
)
trainer.hooks.add(Remove())
trainer.train()
