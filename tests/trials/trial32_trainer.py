"""User trial 32: a trainer that serves its surrogate while it trains (external mode).

    python tests/trials/trial32_trainer.py --output_dir OUT --rendezvous RDV --sims N
      [--serve_port P] [--max_queue Q] [TrainingArguments flags]

The model maps u (16,) float32 to u_next (16,); the simulations (trial32_solver.py)
stream (u, u_next) pairs of a linear map. Prints its serving telemetry and final step
at the end (INFO logging on).
"""

from __future__ import annotations

import argparse
import logging
import sys

import torch

from melissa_trainer import (
    ArgumentParser,
    OnlineTrainer,
    ReceiverConfig,
    ServingHook,
    StreamSource,
    TrainingArguments,
    refusals_end_the_program,
)

N = 16


def process_sample(s):
    return torch.from_numpy(s["u"].copy()), torch.from_numpy(s["u_next"].copy())


def main() -> int:
    logging.basicConfig(level=logging.INFO)
    own = argparse.ArgumentParser()
    own.add_argument("--rendezvous", required=True)
    own.add_argument("--sims", type=int, default=2)
    own.add_argument("--serve_port", type=int, default=None)
    own.add_argument("--max_queue", type=int, default=64)
    opts, rest = own.parse_known_args()
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(rest)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(N, 64), torch.nn.Tanh(), torch.nn.Linear(64, N))
    bind = None if opts.serve_port is None else f"tcp://127.0.0.1:{opts.serve_port}"
    kwargs = {} if bind is None else {"bind": bind}
    serving = ServingHook(
        inputs={"u": ((N,), "float32")},
        process_inputs=lambda r: torch.from_numpy(r["u"].copy()),
        process_outputs=lambda out: {"u_next": out},
        max_queue=opts.max_queue,
        **kwargs,
    )
    stream = StreamSource(
        ReceiverConfig(
            fields={"u": ((N,), "float32"), "u_next": ((N,), "float32")},
            expected_simulations=opts.sims,
            rendezvous_dir=opts.rendezvous,
        )
    )
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), 1e-3),
        train_source=stream,
        process_sample=process_sample,
        hooks=[serving],
    )
    with refusals_end_the_program():
        state = trainer.train()
    print("TELEMETRY", serving.telemetry(), flush=True)
    print("END step", state.global_step, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
