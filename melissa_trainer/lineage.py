"""The ledger checker's entry point (`melissa_trainer.hooks.lineage_check`, which reads
the ledger with `melissa_trainer.hooks.lineage_read`):

    python -m melissa_trainer.lineage check OUTPUT_DIR [--simulations N] [--steps S]

checks that the `SampleLedger` of a training (all its runs, resumes included) trained
on every (simulation, time step) exactly once; exit status 0 when it did, 1 on a
violation, 2 without a ledger. From Python: `check`.
"""

from __future__ import annotations

import sys

from melissa_trainer.hooks.lineage_check import LineageReport, check, main
from melissa_trainer.hooks.lineage_read import Run, read_runs

__all__ = ["LineageReport", "Run", "check", "main", "read_runs"]

if __name__ == "__main__":
    sys.exit(main())
