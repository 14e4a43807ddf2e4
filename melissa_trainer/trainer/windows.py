"""The windows of `OnlineTrainer.train()`'s loop: how many steps each one runs, from
which step batches are taken a window ahead, and the start of the ranks' agreement on
one (`core.stop_sync`).

Under several ranks, the agreement on window k+1 is started before window k's steps
are queued and read after them (`StopSync.start`): the host never waits for the device
to run what it queued. A stop or a signal raised in window k then takes effect at the
end of window k+1.

A run's first window is one step (`window_at`): the ranks agree once each holds one
step's batches, so training starts as soon as data exists (with a FIFO/FIRO buffer,
where each batch is new data, a window of stop_sync_steps batches per rank took 16-32
samples / 7-19 s of a slow study before step 1; tests/trainer/test_first_window.py).
The windows then realign on the multiples of stop_sync_steps (`window_steps`): one more
agreement per run, none per window. Not at a resume (nor a later train()): its windows,
and what it takes from the buffer at each step, fall where the checkpointed run's did
(tests/checkpoint/test_resume_kill.py). So a resume on a multiple with nothing pending
waits for a whole window: one step there would shift the logged buffer counters and,
under several ranks, a starved rank's pads, and "nothing pending" can differ between
ranks (docs/concepts/loop.md; the test: tests/trainer/test_first_step_resume.py). Until
the first multiple (`first_aligned`), no window's batches are taken ahead: its steps
would wait for the next window's batches too (the host waits for the device at these
agreements only). Every rank decides alike (the same steps).
"""

from __future__ import annotations

from typing import Protocol

import torch

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.dataset import StreamDataset
from melissa_trainer.core.stop_sync import StopSync, window_steps

__all__ = ["first_aligned", "start_agreement", "window_at"]


class _Agreeing(Protocol):
    """What the start of an agreement reads of the trainer."""

    @property
    def stop_sync(self) -> StopSync: ...

    @property
    def dataset(self) -> StreamDataset: ...

    @property
    def control(self) -> TrainerControl: ...


def first_aligned(step: int, every: int, max_steps: int | None) -> int:
    """The first step, from a run's (or a resume's) `step`, on a multiple of `every`
    (``stop_sync_steps``) or at `max_steps`: from there on, batches are taken a window
    ahead (module docstring)."""
    return step + window_steps(step, every, max_steps)


def window_at(step: int, every: int, max_steps: int | None) -> int:
    """The steps of the window that starts at `step` (`window_steps`'; <= 0: no more
    steps), but one at a run's first step (step 0; a checkpoint of step 0's too)."""
    window = window_steps(step, every, max_steps)
    return 1 if window > 0 and step == 0 else window


def start_agreement(
    trainer: _Agreeing,
    wanted: int,
    in_hand: int,
    codes: tuple[int, torch.Tensor | None, int],
) -> None:
    """Start the ranks' agreement on a window of `wanted` batches, of which this rank
    has `in_hand` of its own: it can run them all if it can pad (`StreamDataset.pad`).
    `codes`: the preemption's (`StopCause.code`), the loss guard's
    (`LossGuard.window_code`) and the source failure's (`SourceFailure.code`). The
    hooks' requests kept since the last agreement (`TrainerControl.take_asks`) go with
    it: the loop performs the agreed ones once it reads it (`StopSync.asks`)."""
    preempted, loss, source_failed = codes
    capacity = wanted if in_hand < wanted and trainer.dataset.can_pad else in_hand
    trainer.stop_sync.start(
        trainer.control.should_stop,
        capacity,
        preempted,  # (its cause with it: `StopCause`)
        loss,
        batches_in_hand=in_hand,
        source_failed=source_failed,
        asks=trainer.control.take_asks(),  # (a hook's requests, any rank's: `TrainerControl`)
    )
