"""User trial 41 (trial32_solver.py, each line stamped): a Python simulation that
streams (u, u_next) and asks the trainer for u_next before each step (external mode:
MELISSA_TRAINER_SIMULATION_ID, MELISSA_TRAINER_RENDEZVOUS in the environment).

    python tests/trials/trial41_solver.py STEPS TIMEOUT [SLEEP]

Prints one line per request: "ASK t <version|-> <seconds> <kind> @<wall clock>"
(`trial_serving`).
"""

from __future__ import annotations

import sys

from trial_serving import solver_main

if __name__ == "__main__":
    sys.exit(solver_main(stamp=True))
