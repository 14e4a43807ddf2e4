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
time step) trained on once": tests/scripts/serving_follow.py's). The stream ends when
the one simulation has finished. A restarted rank first copies the first attempt's
``rank_<rank>.json`` (its stop record) to ``$LINEAGE_LOG.record.<rank>``, before its
receiver publishes its own there: the test reads the copy, which no restart overwrites
(a poll of the rendezvous file could miss the record under load).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from melissa_trainer import (
    ArgumentParser,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    TrainingArguments,
)

#: the step before which rank 1 fails on the first attempt
FAIL_AT = int(os.environ.get("FAIL_AT", "7"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
RANK = int(os.environ.get("RANK", "0"))
log = open(f"{os.environ['LINEAGE_LOG']}.{ATTEMPT}.{RANK}", "a", buffering=1)  # noqa: SIM115
plain_step = OnlineTrainer._training_step


def recorded_step(self: OnlineTrainer, *, stage_next: bool = False) -> None:
    step = self.state.global_step + 1
    if ATTEMPT == 0 and RANK == 1 and step == FAIL_AT:
        raise ValueError(f"rank 1 fails before step {step} on the first attempt")
    samples = self.dataset.peek_pending()  # the batch this step trains on
    assert samples is not None
    keys = " ".join(f"{int(s['simulation_id'])}:{int(s['time_step'])}" for s in samples)
    log.write(f"{step} {keys}\n")
    plain_step(self, stage_next=stage_next)


OnlineTrainer._training_step = recorded_step  # type: ignore[method-assign]


@dataclass
class ScriptArgs:
    rendezvous: str = ""


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
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=StreamSource(
            ReceiverConfig(expected_simulations=1, rendezvous_dir=opts.rendezvous)
        ),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
    )
    trainer.train()
    print(f"training ended on rank {RANK}, attempt {ATTEMPT}", flush=True)


if __name__ == "__main__":
    main()
