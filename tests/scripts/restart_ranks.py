"""Run by tests/trainer/test_restart_resumes.py under ``accelerate launch --multi_gpu
--num_processes 2 --max_restarts 1`` (gloo on CPU): a trainer in external mode (a
`StreamSource` whose receivers publish in ``--rendezvous``; the solver is the test's),
one sample a step, a checkpoint every ``--save_steps``, resumed from the latest one
(``--resume_from_checkpoint latest``: none on the first attempt, a fresh start).

On the first attempt (``TORCHELASTIC_RESTART_COUNT`` 0) rank 1 raises before its step
``FAIL_AT`` (a `ValueError`): the run fails, torchrun restarts it (the same command),
and the restarted run resumes from the last checkpoint. Before each training step each
rank appends a line to ``$LINEAGE_LOG.<attempt>.<rank>``: the step number and the
``simulation:time_step`` of each sample of its batch (the oracle of "each (simulation,
time step) trained on once": tests/lineage_trainer.py's `record_steps`). The stream ends when
the one simulation has finished. A restarted rank first copies the first attempt's
``rank_<rank>.json`` (its stop record) to ``$LINEAGE_LOG.record.<rank>``, before its
receiver publishes its own there: the test reads the copy, which no restart overwrites
(a poll of the rendezvous file could miss the record under load).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lineage_trainer import ScriptArgs, lineage_trainer, record_steps  # noqa: E402

from melissa_trainer import ArgumentParser, TrainingArguments  # noqa: E402

#: the step before which rank 1 fails on the first attempt (0: never; the run stops on a
#: solver's NaN under --nonfinite fail: tests/trainer/test_restart_after_nonfinite.py)
FAIL_AT = int(os.environ.get("FAIL_AT", "7"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
RANK = int(os.environ.get("RANK", "0"))
log = open(f"{os.environ['LINEAGE_LOG']}.{ATTEMPT}.{RANK}", "a", buffering=1)  # noqa: SIM115


def fail_on_first_attempt(step: int) -> None:
    if ATTEMPT == 0 and RANK == 1 and step == FAIL_AT:
        raise ValueError(f"rank 1 fails before step {step} on the first attempt")


record_steps(log, fail_on_first_attempt)


def keep_first_record(rendezvous: Path) -> None:
    """The previous attempt's rendezvous file of this rank, copied whole (write, then
    rename) to ``$LINEAGE_LOG.record.<rank>``: written as that attempt stopped, before
    torchrun restarted the run, it is there as this attempt starts."""
    kept = Path(f"{os.environ['LINEAGE_LOG']}.record.{RANK}")
    partial = kept.with_name(kept.name + ".partial")
    partial.write_bytes((rendezvous / f"rank_{RANK}.json").read_bytes())
    partial.rename(kept)


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    if ATTEMPT > 0:  # (before this attempt's receiver republishes the file)
        keep_first_record(Path(opts.rendezvous))
    lineage_trainer(args, opts).train()
    print(f"training ended on rank {RANK}, attempt {ATTEMPT}", flush=True)


if __name__ == "__main__":
    main()
