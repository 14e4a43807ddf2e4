"""Run by tests/trainer/test_serving_resume.py (under `python`, or `accelerate launch`
for several ranks): a trainer that serves predictions (`ServingHook`, loopback, its
serve file in --rendezvous) while it trains on an in-process source, and holds still
where the test needs it:

* ``--hold save``: after its first checkpoint, writes OUT/saved.json (the step) and
  waits forever (the test kills it with SIGKILL); its idle thread keeps serving.
* ``--hold resumed``: three steps after it resumed, writes OUT/resumed_rank_R.json and
  waits until OUT/release exists (the test makes it once the client was answered by
  the resumed model), then trains to `max_steps`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import small_model, xy  # noqa: E402
from reshard_run import samples  # noqa: E402

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    Hook,
    OnlineTrainer,
    ServingHook,
    TrainingArguments,
)


@dataclass
class ScriptArgs:
    rendezvous: str = ""
    hold: str = "save"  # or "resumed"


class Hold(Hook):
    def __init__(self, out: Path, hold: str) -> None:
        self.out, self.hold = out, hold
        self.resumed_at: int | None = None

    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        if self.hold == "save" and trainer.is_main_process:
            (self.out / "saved.json").write_text(json.dumps({"step": state.global_step}))
            threading.Event().wait()  # until SIGKILL

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        self.resumed_at = state.global_step

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if self.hold != "resumed" or state.global_step != (self.resumed_at or 0) + 3:
            return
        name = f"resumed_rank_{trainer.process_index}.json"
        record = {"resumed_at": self.resumed_at, "world_size": trainer.num_processes}
        (self.out / name).write_text(json.dumps(record))
        deadline = time.monotonic() + 120
        while not (self.out / "release").exists():  # (another process's event: a file)
            if time.monotonic() > deadline:
                raise TimeoutError("the test never released the trainer")
            time.sleep(0.02)


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    out = Path(args.output_dir)
    serving = ServingHook(
        {"x": ((3,), "float32")},
        process_inputs=lambda s: torch.from_numpy(s["x"].copy()),
        bind="tcp://127.0.0.1:*",
        rendezvous_dir=opts.rendezvous,
    )
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=lambda r, world: samples(100_000, 0, r),
        process_sample=xy,
        hooks=[serving, Hold(out, opts.hold)],
    )
    state = trainer.train()
    rank = int(os.environ.get("RANK", "0"))
    (out / f"end_rank_{rank}.json").write_text(json.dumps({"global_step": state.global_step}))


if __name__ == "__main__":
    main()
