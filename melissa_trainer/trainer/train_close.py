"""`close_training`: what `OnlineTrainer.train()` does last, in its ``finally``, whether
it returns or raises: the source stopped, the hooks closed, the ranks' exit meeting
after an end they all agreed on (`exit_meeting`), the signal handlers given back, the
output directory freed, the roll call's sockets closed.

The caller sets `OnlineTrainer.train_ended` before calling it: a step here that raises
(a hook's close, the lock's release, a SIGINT landing once the handlers are given back)
must not leave train() ended yet flagged running, or a collective call after it skips
its check-in (`after_train`) and a hook fired then counts as one during train()
(`actions`). The training thread only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from melissa_trainer.trainer.exit_meeting import hold_term, meet, meet_timeout
from melissa_trainer.trainer.roll_call import close_roll

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer
    from melissa_trainer.trainer.output_hold import OutputDirHold
    from melissa_trainer.trainer.preemption import PreemptionHandler
    from melissa_trainer.trainer.source_failure import SourceFailure

__all__ = ["close_training"]


def close_training(
    trainer: OnlineTrainer,
    hold: OutputDirHold,
    preemption: PreemptionHandler,
    failure: SourceFailure,
    preempted: bool,
    meet_bound: float | None,
) -> None:
    """End `trainer`'s `train()`: `hold` its hold on `output_dir`, `preemption` its
    handler, `failure` its source's failure record, `preempted` whether it raises
    `Preempted`, `meet_bound` the exit meeting's bound the ranks agreed at the start
    (None: not agreed, the source's). Each step runs even when one before it raised;
    the last exception raised propagates, an earlier one as its ``__context__``."""
    try:
        try:
            hold.stopping()  # (a write to the lock's file)
        finally:
            try:
                trainer.source.stop()
            finally:
                trainer.hooks.close()  # (its files: closed after a failed stop too)
    finally:
        # An end every rank agreed on: they meet once it is done (`exit_meeting`)
        try:
            met = (preempted or failure.agreed) and trainer.stop_sync.distributed
            if met:  # (a signal from now: the exit's words; the hold before restore)
                preemption.ending = "a preemption" if preempted else failure.words
                # (the agreed bound: the slowest rank's stop, rank 0's study's kill_grace)
                bound = meet_timeout(trainer.source) if meet_bound is None else meet_bound
                meet(trainer.process_index, preemption.ending, bound, trainer.accelerator.device)
                hold_term(previous=preemption.previous_term())  # (the launcher's SIGTERM)
        finally:  # (meet raises no Exception, but a KeyboardInterrupt may land in it)
            try:
                preemption.restore()
            finally:
                try:
                    hold.release()  # the run is over: output_dir is free
                finally:
                    close_roll(trainer.stop_sync.watch.roll)  # (its sockets: reopened)
