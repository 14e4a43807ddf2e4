"""`TrainerSteps`: one optimizer step of `OnlineTrainer`, a base class of it.

`_training_step` runs one optimizer step over `gradient_accumulation_steps` pending
micro-batches, in the order of `hooks.base.Event`'s docstring: STEP_START; per
micro-batch, BATCH_READY, the step's forward, loss and backward (`TrainStep.backward`),
the loss recorded for the loss guard and the log's figures (kept on the device: no
host read), the per-sample losses when a hook listens (SAMPLE_LOSSES; handed straight
to the library's trackers when only they listen: `TrainerLosses._choose_loss`),
AFTER_BACKWARD; then the update (`TrainStep.update`), ``global_step`` + 1, STEP_END,
and the actions the hooks asked for (`TrainerActions._perform_requested_actions`). A
scheduler that raises in the update (`schedule_end`): the step is counted, then in a
single process its checkpoint written and `ScheduleEnded` raised; under several ranks
the failure is held until the ranks' next agreement (`SourceFailure.hold_schedule`)
and the step goes on as any other.
`_next_batch` is where a batch comes from: staged a step ahead (`stage_batches`), or
collated and sent to the device now.
The loop (`OnlineTrainer.train`) decides how many steps a window runs: every rank runs
the same ones, so each step's collectives (DDP's backward) meet.

Thread-safety: the training thread only, as the trainer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from accelerate.utils import send_to_device

from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.core.accelerated import make_train_step
from melissa_trainer.core.figures import LogFigures
from melissa_trainer.core.loss_guard import LossGuard
from melissa_trainer.core.schedule_length import SchedulerStepError
from melissa_trainer.core.staging import BatchStager
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Event
from melissa_trainer.trainer.actions import TrainerActions
from melissa_trainer.trainer.batch_dtypes import checked_first_backward
from melissa_trainer.trainer.losses import TrainerLosses
from melissa_trainer.trainer.schedule_end import schedule_ended, schedule_failed

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.source_failure import SourceFailure

__all__ = ["TrainerSteps"]


class TrainerSteps(TrainerActions, TrainerLosses):
    """The steps of `OnlineTrainer` (which sets the attributes declared here)."""

    args: TrainingArguments
    state: TrainerState
    optimizer: torch.optim.Optimizer
    #: the figures counted since the last log (the loss sum is part of a checkpoint)
    log_figures: LogFigures
    #: the next batch collated and copied to the device a step ahead (`staging`)
    _stager: BatchStager | None
    #: batches are sent to the device (not a CPU run)
    _move_batches: bool
    #: the step at which the lr_scheduler's schedule ends, where it says (None: it does
    #: not, or no scheduler), set as `train()` starts (`schedule_end.check_schedule`):
    #: training stops there with `ScheduleEnded`, its checkpoint written
    schedule_end: int | None = None
    #: this `train()`'s held failures (`source_failure.SourceFailure`, set as it starts;
    #: None before the first): where a scheduler's failure is held under several ranks
    _failure: SourceFailure | None = None
    #: no micro-batch trained yet by this trainer: its backward's dtype error is said in
    #: the library's words (`batch_dtypes`: a float64 `process_sample`)
    _first_backward: bool = True

    def _set_up_steps(self, lr_scheduler: Any | None, distributed: bool) -> None:
        """Build what a step uses, once, in the constructor (the model and optimizer
        prepared, the dataset built): the loss guard (`distributed`: under several
        ranks), the stager, the step's arithmetic and the log's figures."""
        acc, args = self.accelerator, self.args
        self._loss_guard = LossGuard(acc.device, distributed)
        self._move_batches = acc.device.type != "cpu"
        self._stager = BatchStager(self.dataset, acc.device) if args.stage_batches else None
        # the step's arithmetic, plain or Accelerate's, chosen once (see `accelerated`)
        self._step = make_train_step(
            acc,
            self.model,
            self.optimizer,
            lr_scheduler,
            self.compute_loss,
            compile=args.compile_options(),  # the step's model compiled (`compiled`)
            max_grad_norm=args.max_grad_norm,  # (its norms: `log_figures`')
        )
        self._choose_loss()  # (again at each train(): a hook may have been added since)
        self.log_figures = LogFigures(acc.device, self._step.grad_norms)

    def _training_step(self, stage_next: bool = False) -> None:
        """One optimizer step over `gradient_accumulation_steps` pending micro-batches;
        with `stage_next` (the window holds another step), the next step's first batch
        is staged at the end (after the actions: a checkpoint there saves it raw)."""
        state, control, hooks = self.state, self.control, self.hooks
        if self.schedule_end is not None and state.global_step >= self.schedule_end:
            raise schedule_ended(self._as_trainer(), self._loss_guard.check)  # (saved first)
        step, figures, stager = self._step, self.log_figures, self._stager
        hooks.fire(Event.STEP_START, self, state, control)
        micro = self.args.gradient_accumulation_steps
        for k in range(micro):
            batch, n = self._next_batch()
            state.samples_seen += n
            figures.samples += n
            hooks.fire(Event.BATCH_READY, self, state, control, batch)
            if self._first_backward:  # (once: `batch_dtypes`)
                self._first_backward = False
                loss = checked_first_backward(step.backward, batch, self.model, self.dataset)
            else:
                loss = step.backward(batch)
            dataset = self.dataset  # (the batch's ids, once: the tracked losses' too)
            ids = dataset.last_simulation_ids if dataset.track_simulation_ids else None
            self._loss_guard.record(loss, state.global_step + 1, dataset.last_samples, ids)
            figures.loss_sum += loss  # stays on the device: no sync per step
            figures.loss_count += 1
            sample_losses = self._sample_losses
            if sample_losses is not None:  # a hook listens to SAMPLE_LOSSES
                self._sample_losses = None
                sinks = self._sample_loss_sinks
                if sinks is None:
                    hooks.fire(Event.SAMPLE_LOSSES, self, state, control, sample_losses, ids)
                else:  # only the library's trackers listen: what they would do (`_choose_loss`)
                    for record in sinks:
                        record(ids, sample_losses)
            hooks.fire(Event.AFTER_BACKWARD, self, state, control, loss)
            if stager is not None and k + 1 < micro:
                stager.stage()  # this step's next micro-batch, while the GPU runs this one
        try:
            step.update()
        except SchedulerStepError as failed:  # after the optimizer's step: a trained step
            state.global_step += 1
            figures.steps += 1
            held = self._failure
            if held is None or not self._as_trainer().stop_sync.distributed:
                # (the step is trained: its hooks hear of it, as under several ranks,
                # before its checkpoint holds their states)
                hooks.fire(Event.STEP_END, self, state, control)
                ended = schedule_failed(self._as_trainer(), failed, self._loss_guard.check)
                raise ended from failed.__cause__  # (checkpoint saved first)
            # Several ranks: on this rank only, maybe; held until the ranks' next
            # agreement, training on in step with them meanwhile (`schedule_end`)
            held.hold_schedule(failed)
        else:
            state.global_step += 1
            figures.steps += 1
        hooks.fire(Event.STEP_END, self, state, control)
        self._perform_requested_actions()
        if stager is not None and stage_next:
            stager.stage()

    def _next_batch(self) -> tuple[Any, int]:
        """The next pending batch on the device and its number of samples: the staged
        one with `stage_batches`, else collated and sent now (`send_to_device`)."""
        if self._stager is not None:
            return self._stager.next_batch()
        batch, n = self.dataset.next_batch()
        if self._move_batches:
            batch = send_to_device(batch, self.accelerator.device, non_blocking=True)
        return batch, n
