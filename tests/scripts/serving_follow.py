"""Run by tests/trainer/test_serving_follow.py: a trainer in external mode (a
`StreamSource` whose receivers publish in ``--rendezvous``; the solver is the test's)
that serves predictions (`ServingHook`, its serve file beside the receivers'), one
sample a step, and records what it trains on.

Before each training step it appends a line to ``$LINEAGE_LOG``: the step number and
the ``simulation:time_step`` of each sample of the batch (the oracle of "each (simulation,
time step) trained on once", as tests/scripts/heat_lineage.py). SIGTERM: a checkpoint,
exit 143 (`Preempted`); ``--resume_from_checkpoint latest`` resumes it. The stream ends
when the one simulation has finished.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lineage_trainer import ScriptArgs, lineage_trainer, record_steps  # noqa: E402
from serving_parts import serving_hook  # noqa: E402

from melissa_trainer import ArgumentParser, TrainingArguments  # noqa: E402

log = open(os.environ["LINEAGE_LOG"], "a", buffering=1)  # noqa: SIM115 - the process's life
record_steps(log)


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    lineage_trainer(args, opts, [serving_hook()]).train()


if __name__ == "__main__":
    main()
