"""The heat example with a `SampleLedger` (and, with ``$STEP_SLEEP``, a pause after
each step, so that a test can kill it at a chosen point): the e2e test's driver. The
hooks are added through the public `hooks` argument of the example's trainer."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import heat_pde.train as heat  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer  # noqa: E402
from melissa_trainer.hooks import SampleLedger  # noqa: E402

PAUSE = float(os.environ.get("STEP_SLEEP", "0"))


class Paced(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        time.sleep(PAUSE)


class LedgeredTrainer(OnlineTrainer):
    def __init__(self, *args: Any, hooks: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, hooks=[*hooks, SampleLedger(), *([Paced()] if PAUSE else [])],
                         **kwargs)  # fmt: skip


heat.OnlineTrainer = LedgeredTrainer  # type: ignore[misc]
with heat.common.refusals_end_the_program():
    heat.main(sys.argv[1:])
