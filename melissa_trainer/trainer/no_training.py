"""A run whose stream ended before its first step: an error, not a quiet end.

Every rank of a run trains the same steps (`OnlineTrainer.train`): a rank whose data ran
out first trains on its last batches again (`StreamDataset.pad`), but a rank that
received no sample at all has nothing to train on again, so no rank can train a step,
however many samples the others hold. A trial run (2 ranks, 2 simulations of one time
step each: rank 0 received both samples, rank 1 none, under the routing ``t % W`` of
the time) ended at step 0 with exit code 0, a checkpoint of the untrained model, and no
word of why. The client now routes ``(simulation_id + t) % W`` (docs/protocol.md
section 3), which spreads such simulations over the ranks; fewer simulations than ranks
(or clients routing ``t % W``) can still leave a rank empty.

A run that trained no step is not a success a pipeline should go on from: once the
ranks agree that the stream ended at step 0 (`refuse_untrained`, called by
`ending.end_training` before anything of the end runs: no checkpoint of the untrained
model is written), every rank raises `NoTrainingError` (a `SourceError`: the data is
what was missing). Rank 0 says why in full at ERROR, naming each rank's samples; a
rank that received none says so in one line of its own; every rank raises it quietly
(`refusal.elsewhere`): uncaught, it ends every rank with exit code 1, no traceback.

A resumed run that trains no further step (its stream had ended at the checkpoint) is
not this: its model was trained (see `hooks.progress`'s end line, which says how to
train on).
"""

from __future__ import annotations

import logging

import torch

from melissa_trainer.common.refusal import elsewhere
from melissa_trainer.core.view import TrainerView
from melissa_trainer.sources.source import SourceError

__all__ = ["NoTrainingError", "refuse_untrained", "untrained_words"]

logger = logging.getLogger(__name__)


class NoTrainingError(SourceError):
    """The stream ended on every rank before the first training step. `samples`: the
    samples each rank received, by rank."""

    def __init__(self, message: str, samples: list[int] | None = None) -> None:
        super().__init__(message)
        self.samples = list(samples or [])


def untrained_words(samples: list[int]) -> str:
    """Why no rank trained a step, given the samples each rank received (by rank), and
    what to change: the message of rank 0's `NoTrainingError`."""
    world, total = len(samples), sum(samples)
    each = ", ".join(f"rank {r}: {n}" for r, n in enumerate(samples))
    if total == 0:
        where = "any rank" if world > 1 else "this rank"
        return (
            f"no training step: the stream ended with no sample on {where}, so there "
            "was nothing to train on (did the simulations send data? their logs, and "
            "the receivers' lines above, say what they sent and what was refused)"
        )
    empty = [r for r, n in enumerate(samples) if n == 0]
    if not empty:  # (every rank had a sample, yet no step: a read never served a batch)
        return (
            f"no training step: the stream ended before the first step although every "
            f"rank received samples ({each}): no batch was served before it ended"
        )
    names = ", ".join(str(r) for r in empty)
    ranks = f"rank {names}" if len(empty) == 1 else f"ranks {names}"
    # (the others' streams may still run: the count is theirs when the run ended)
    return (
        f"no training step: the stream of {ranks} ended with no sample (samples "
        f"received by then: {each}). Every rank trains the same steps, and a "
        f"rank with no sample has no batch to train on, not even one to repeat while "
        f"the others train, so no rank trained. The library's client sends time step t "
        f"of simulation s to rank (s + t) mod {world} (t mod {world} when given its "
        f"endpoints instead of the rendezvous, or an older client): fewer simulations "
        f"than ranks, each of fewer than {world} time steps, leave some ranks without "
        f"data. Run at least {world} simulations (or give each at least {world} time "
        f"steps), or train on fewer ranks (--num_processes {max(1, world - len(empty))})"
    )


def _samples_per_rank(trainer: TrainerView) -> list[int]:
    """The samples each rank's buffer received in this run, by rank. Collective under
    several ranks."""
    put = trainer.buffer.stats().put
    if trainer.num_processes <= 1:
        return [int(put)]
    acc = trainer.accelerator
    counts = acc.gather(torch.tensor([put], dtype=torch.int64, device=acc.device))
    return [int(n) for n in counts.tolist()]


def refuse_untrained(trainer: TrainerView, signum: int) -> None:
    """After the loop: raise `NoTrainingError` on every rank when it ended by the end of
    the stream at step 0 (not a signal, a hook's stop or `max_steps`), whose decision
    every rank shares (collective then: the ranks' sample counts are gathered). Rank 0
    logs its message at ERROR; a rank that received no sample logs one ERROR line
    naming itself; every rank raises the quiet copy (`refusal.elsewhere`: a
    `NoTrainingError` and a `SystemExit` with code 1, which `ending.source_failed` passes
    on unchanged and Python exits with, silently)."""
    state = trainer.state
    if state.global_step or signum or not state.stream_ended:
        return
    if not trainer.ended_by.startswith("end of stream"):
        return
    samples = _samples_per_rank(trainer)
    me = trainer.process_index
    error = NoTrainingError(untrained_words(samples), samples)
    if me == 0:
        logger.error("%s", error)
    elif samples[me] == 0:
        logger.error(
            "rank %d received no sample before the stream ended, so no rank trained a "
            "step (every rank trains the same steps): rank 0's error says why and what "
            "to change",
            me,
        )
    raise elsewhere(error, max(me, 1))  # (rank 0's too: said above, once)
