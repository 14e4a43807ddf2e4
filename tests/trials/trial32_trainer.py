"""User trial 32: a trainer that serves its surrogate while it trains (external mode).

    python tests/trials/trial32_trainer.py --output_dir OUT --rendezvous RDV --sims N
      [--serve_port P] [--max_queue Q] [TrainingArguments flags]

The model maps u (16,) float32 to u_next (16,); the simulations (trial32_solver.py)
stream (u, u_next) pairs of a linear map. Prints its serving telemetry and final step
at the end (INFO logging on). The study itself is `trial_serving`'s.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from trial_serving import trainer_main


def serving(opts: argparse.Namespace) -> dict[str, Any]:
    """The ServingHook's queue bound, and its bind when ``--serve_port`` is given."""
    bind = {} if opts.serve_port is None else {"bind": f"tcp://127.0.0.1:{opts.serve_port}"}
    return {"max_queue": opts.max_queue, **bind}


def main() -> int:
    own = argparse.ArgumentParser()
    own.add_argument("--serve_port", type=int, default=None)
    own.add_argument("--max_queue", type=int, default=64)
    return trainer_main(own, serving=serving)


if __name__ == "__main__":
    sys.exit(main())
