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
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from melissa_trainer import (
    ArgumentParser,
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    ServingHook,
    StreamSource,
    TrainingArguments,
    refusals_end_the_program,
)

N = 16
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


def process_sample(s):
    return torch.from_numpy(s["u"].copy()), torch.from_numpy(s["u_next"].copy())


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(created).3f %(levelname)s %(name)s: %(message)s"
    )
    own = argparse.ArgumentParser()
    own.add_argument("--rendezvous", required=True)
    own.add_argument("--sims", type=int, default=2)
    own.add_argument("--hidden", type=int, default=64)
    own.add_argument("--hold_save", type=int, default=0)
    opts, rest = own.parse_known_args()
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(rest)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    h = opts.hidden
    model = torch.nn.Sequential(torch.nn.Linear(N, h), torch.nn.Tanh(), torch.nn.Linear(h, N))
    serving = ServingHook(
        inputs={"u": ((N,), "float32")},
        process_inputs=lambda r: torch.from_numpy(r["u"].copy()),
        process_outputs=lambda out: {"u_next": out},
    )
    stream = StreamSource(
        ReceiverConfig(
            fields={"u": ((N,), "float32"), "u_next": ((N,), "float32")},
            expected_simulations=opts.sims,
            rendezvous_dir=opts.rendezvous,
        )
    )
    hooks: list[Hook] = [serving]
    if opts.hold_save:
        hooks.append(HoldSave(opts.hold_save))
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), 1e-3), train_source=stream,
        process_sample=process_sample, hooks=hooks,
    )  # fmt: skip
    with refusals_end_the_program():
        state = trainer.train()
    print("TELEMETRY", serving.telemetry(), flush=True)
    print("END step", state.global_step, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
