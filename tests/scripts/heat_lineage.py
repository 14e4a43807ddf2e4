"""The heat example, recording what it trains on: the crash-and-resume tests' driver.

Before each training step it appends a line to ``$LINEAGE_LOG``: the step number and
the ``simulation:time_step:parameters`` of each sample of the batch about to be trained
on (parameters as comma-separated values, in the order the sample has them), then sleeps
``$STEP_SLEEP`` seconds (slow training, so that a test can kill it at chosen points:
while simulations run, after they all exited, ...). Arguments are the example's.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path

from melissa_trainer.trainer.loop import OnlineTrainer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "heat_pde" / "train.py"

log = open(os.environ["LINEAGE_LOG"], "a", buffering=1)  # noqa: SIM115 - the process's life
pause = float(os.environ.get("STEP_SLEEP", "0"))
hold = os.environ.get("LINEAGE_HOLD")  # a file: no step is trained while it exists
hold_seconds = float(os.environ.get("LINEAGE_HOLD_SECONDS", "120"))  # ... at most that long
plain_step = OnlineTrainer._training_step


def recorded_step(self: OnlineTrainer, *, stage_next: bool = False) -> None:
    samples = self.dataset.peek_pending()  # the batch this step trains on
    assert samples is not None
    keys = " ".join(
        f"{int(s['simulation_id'])}:{int(s['time_step'])}:"
        + ",".join(repr(float(p)) for p in s["parameters"])
        for s in samples
    )
    log.write(f"{self.state.global_step + 1} {keys}\n")
    deadline = time.monotonic() + hold_seconds
    while hold and os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.02)
    if pause:
        time.sleep(pause)
    plain_step(self, stage_next=stage_next)


OnlineTrainer._training_step = recorded_step  # type: ignore[method-assign]

# $LINEAGE_SLOW_SAVE seconds: every save after the first lingers that long once its parts
# are written into the staging directory, before the commit, so that a test can signal
# the run while a checkpoint is being written (the staging directory is there meanwhile)
slow_save = float(os.environ.get("LINEAGE_SLOW_SAVE", "0"))
if slow_save:
    from melissa_trainer.checkpoint import registry

    plain_write = registry.write
    saves = 0

    def slow_write(trainer: object, staging: Path) -> None:
        global saves
        plain_write(trainer, staging)  # type: ignore[arg-type]
        saves += 1
        if saves > 1:
            time.sleep(slow_save)

    registry.write = slow_write  # type: ignore[assignment]
sys.argv = [str(EXAMPLE), *sys.argv[1:]]
runpy.run_path(str(EXAMPLE), run_name="__main__")
