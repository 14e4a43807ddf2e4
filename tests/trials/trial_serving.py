"""What the serving trials' scripts share (user trials 32 and 41): the study's fields,
the trainer's model, serving hook, stream and run (`trainer_main`), and the solver's
loop (`solver_main`). Imported by the scripts beside it (run as files: their folder is
on ``sys.path``).

The model maps u (16,) float32 to u_next (16,); the simulations stream (u, u_next)
pairs of a linear map and ask the trainer for u_next before each step (external mode:
MELISSA_TRAINER_SIMULATION_ID and MELISSA_TRAINER_RENDEZVOUS in their environment).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

N = 16
#: the fields the solvers send and the trainer receives
FIELDS = {"u": ((N,), "float32"), "u_next": ((N,), "float32")}


def process_sample(s: dict[str, np.ndarray]) -> tuple[Any, Any]:
    import torch

    return torch.from_numpy(s["u"].copy()), torch.from_numpy(s["u_next"].copy())


def trainer_main(
    own: argparse.ArgumentParser,
    hooks: Callable[[argparse.Namespace], list[Any]] = lambda opts: [],
    serving: Callable[[argparse.Namespace], dict[str, Any]] = lambda opts: {},
) -> int:
    """Parse `own`'s flags (``--rendezvous``, ``--sims``, ``--hidden`` added here) and
    the `TrainingArguments` flags, train a serving trainer on the stream of ``--sims``
    simulations with the `hooks(opts)` after its `ServingHook` (made with the keyword
    arguments `serving(opts)`), and print its serving telemetry and final step (INFO
    logging on, each line stamped with the wall clock)."""
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

    logging.basicConfig(
        level=logging.INFO, format="%(created).3f %(levelname)s %(name)s: %(message)s"
    )
    own.add_argument("--rendezvous", required=True)
    own.add_argument("--sims", type=int, default=2)
    own.add_argument("--hidden", type=int, default=64)
    opts, rest = own.parse_known_args()
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(rest)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    h = opts.hidden
    model = torch.nn.Sequential(torch.nn.Linear(N, h), torch.nn.Tanh(), torch.nn.Linear(h, N))
    hook = ServingHook(
        inputs={"u": ((N,), "float32")},
        process_inputs=lambda r: torch.from_numpy(r["u"].copy()),
        process_outputs=lambda out: {"u_next": out},
        **serving(opts),
    )
    stream = StreamSource(
        ReceiverConfig(
            fields=FIELDS, expected_simulations=opts.sims, rendezvous_dir=opts.rendezvous
        )
    )
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), 1e-3), train_source=stream,
        process_sample=process_sample, hooks=[hook, *hooks(opts)],
    )  # fmt: skip
    with refusals_end_the_program():
        state = trainer.train()
    print("TELEMETRY", hook.telemetry(), flush=True)
    print("END step", state.global_step, flush=True)
    return 0


def solver_main(argv: Sequence[str] = sys.argv[1:], *, stamp: bool = False) -> int:
    """``STEPS TIMEOUT [SLEEP]``: a simulation that asks a prediction of u_next with
    `TIMEOUT` before each of its `STEPS` sends, then sleeps `SLEEP` s. Prints a line
    per request, "ASK t <version|-> <seconds> <kind>", with " @<wall clock>" after it
    if `stamp`; then "DONE"."""
    from melissa_trainer.client import Client, PredictionUnavailable

    steps, timeout = int(argv[0]), float(argv[1])
    pause = float(argv[2]) if len(argv) > 2 else 0.0
    rng = np.random.default_rng()
    a = (np.eye(N, k=1) * 0.5 + np.eye(N) * 0.4).astype(np.float32)
    with Client(fields=FIELDS) as client:
        u = rng.standard_normal(N).astype(np.float32)
        for t in range(steps):
            t0 = time.monotonic()
            try:
                out, version = client.predict({"u": u}, timeout=timeout)
                kind = "ok"
            except PredictionUnavailable as exc:
                version, kind = "-", f"{type(exc).__name__}:{getattr(exc, 'reason', '')}:{exc}"
            took = time.monotonic() - t0
            when = f" @{time.time():.3f}" if stamp else ""
            print(f"ASK {t} {version} {took:.4f} {kind}{when}", flush=True)
            u_next = (a @ u + 0.1 * np.sin(u)).astype(np.float32)
            client.send(t, u=u, u_next=u_next)
            u = u_next if np.abs(u_next).max() > 0.1 else rng.standard_normal(N).astype(np.float32)
            if pause:
                time.sleep(pause)
    print("DONE", flush=True)
    return 0
