"""A run whose stream ended before its first step: an error, not a quiet end.

Every rank of a run trains the same steps (`OnlineTrainer.train`): a rank whose data ran
out first trains on its last batches again (`StreamDataset.pad`), but a rank that
received no sample at all has nothing to train on again, so no rank can train a step,
however many samples the others hold. A trial run (2 ranks, 2 simulations of one time
step each: rank 0 received both samples, rank 1 none, under the routing ``t % W`` of
the time) ended at step 0 with exit code 0, a checkpoint of the untrained model, and no
word of why. The client now routes ``(simulation_id + t) % W`` (docs/protocol.md
section 3), which spreads such simulations over the ranks; fewer simulations than ranks,
simulations of fewer than W steps whose ids share the ranks (0 and 2 of 2 ranks, when 1
failed), or clients routing ``t % W``, can still leave a rank empty. The message
(`no_training_words`) names what each rank received and from which simulations, and
rank 0's launcher's counts under a `Study`.

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
from typing import Any

import torch

from melissa_trainer.common.refusal import elsewhere
from melissa_trainer.core.view import TrainerView
from melissa_trainer.core.wait_words import UNTRAINED_USUAL
from melissa_trainer.sources.source import SourceError
from melissa_trainer.trainer.no_training_words import StudyCounts, untrained_words

__all__ = ["NoTrainingError", "refuse_untrained"]

logger = logging.getLogger(__name__)

#: what a rank held in the gather of the ranks' samples waits for (the watch's warnings)
_WAITS_FOR = (
    "the other ranks at the end of a run that trained no step (the all-gather of the "
    "samples each rank received)"
)


class NoTrainingError(SourceError):
    """The stream ended on every rank before the first training step. `samples`: the
    samples each rank received, by rank."""

    def __init__(self, message: str, samples: list[int] | None = None) -> None:
        super().__init__(message)
        self.samples = list(samples or [])


def _held(trainer: TrainerView) -> dict[int, int] | None:
    """Simulation id -> the samples this rank's receiver took from it (refused ones left
    out), for each simulation that sent it some or finished here (0: it sent none), or
    None when the source is not a stream of simulations (a `StreamSource`, or a
    `Study`'s)."""
    stream = getattr(trainer.source, "stream", trainer.source)  # (a Study's StreamSource)
    receiver: Any = getattr(stream, "receiver", None)
    ingest = getattr(receiver, "ingest", None)
    if receiver is None or ingest is None:
        return None
    held = {int(s): 0 for s in receiver.finished_simulations()}
    for s, (n, bad) in ingest.samples_of().items():
        if n - bad > 0 or s in held:
            held[int(s)] = int(n - bad)
    return held


def _study_counts(trainer: TrainerView) -> StudyCounts | None:
    """The launcher's counts on rank 0 when the source is a `Study` (None elsewhere, and
    in external mode: no launcher)."""
    summary = getattr(getattr(trainer.source, "launcher", None), "summary", None)
    if trainer.process_index != 0 or not callable(summary):
        return None
    told = summary()
    running = int(told["running"]) + int(told["exited"])
    return StudyCounts(int(told["finished"]), int(told["failed"]), int(told["redraws"]), running)


def _gathered(trainer: TrainerView) -> tuple[list[int], list[dict[int, int]] | None]:
    """The samples each rank's buffer received in this run, and the simulations they
    came from (None when some rank's source does not know), by rank. Collective under
    several ranks."""
    mine = (int(trainer.buffer.stats().put), _held(trainer))
    ranks: list[Any] = [mine]
    if trainer.num_processes > 1:  # (watched: a rank held there warns, `core.wait_watch`)
        ranks = [None] * trainer.num_processes
        with trainer.stop_sync.watch.waiting(_WAITS_FOR, UNTRAINED_USUAL):
            torch.distributed.all_gather_object(ranks, mine)
    samples = [put for put, _ in ranks]
    held = [h for _, h in ranks]
    if any(h is None for h in held):
        return samples, None
    return samples, [h for h in held if h is not None]


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
    samples, held = _gathered(trainer)
    me = trainer.process_index
    words = untrained_words(samples, held, _study_counts(trainer), trainer.args.batch_size)
    error = NoTrainingError(words, samples)
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
