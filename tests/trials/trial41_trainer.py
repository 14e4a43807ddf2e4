"""User trial 41: a serving trainer (external mode) that records what it trains on and
can hold inside a checkpoint save.

    python tests/trials/trial41_trainer.py --output_dir OUT --rendezvous RDV --sims N
      [--hidden H] [--hold_save K] [TrainingArguments flags]

Before each training step it appends "STEP sim:t ..." to the file $LINEAGE_LOG. With
``--hold_save K``, at the K-th call of its stateful hook's state_dict (two per save: the
save's record, then its files' write: K=4 holds the second save while its files are
written), it creates $HOLD_MARK and waits until the file $HOLD_RELEASE exists (the trial
kills it there). `trial41_drive.py` runs it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from trial_serving import trainer_main

from melissa_trainer import Hook, OnlineTrainer

log = open(os.environ["LINEAGE_LOG"], "a", buffering=1)  # noqa: SIM115
plain_step = OnlineTrainer._training_step


def recorded_step(self: OnlineTrainer, *, stage_next: bool = False) -> None:
    samples = self.dataset.peek_pending()
    assert samples is not None
    keys = " ".join(f"{int(s['simulation_id'])}:{int(s['time_step'])}" for s in samples)
    log.write(f"{self.state.global_step + 1} {keys}\n")
    plain_step(self, stage_next=stage_next)


OnlineTrainer._training_step = recorded_step  # type: ignore[method-assign]


class HoldSave(Hook):
    def __init__(self, k: int) -> None:
        self.k, self.saves = k, 0

    def state_dict(self) -> dict[str, Any]:
        self.saves += 1
        if self.saves == self.k:
            Path(os.environ["HOLD_MARK"]).write_text(str(self.saves))
            while not Path(os.environ["HOLD_RELEASE"]).exists():
                time.sleep(0.01)
        return {"saves": self.saves}

    def load_state_dict(self, state: Any) -> None:
        pass


def main() -> int:
    own = argparse.ArgumentParser()
    own.add_argument("--hold_save", type=int, default=0)
    return trainer_main(
        own, hooks=lambda opts: [HoldSave(opts.hold_save)] if opts.hold_save else []
    )


if __name__ == "__main__":
    sys.exit(main())
