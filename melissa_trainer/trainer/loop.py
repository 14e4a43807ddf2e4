"""`OnlineTrainer`: the training loop, hook dispatch and stop synchronisation.

Read `train()` from top to bottom: it is the loop of `hooks.base.Event`'s docstring.
The data path is one-directional: source -> buffer -> dataset -> this loop. What the
constructor builds of its arguments is `setup`'s (the data path, the hooks); what the
loop does at its action points (`_perform_requested_actions`, the end's
`_perform_final_actions`: log, validate, save), `actions`'; the loss a step minimises,
`losses`'; one optimizer step and what it uses, `stepping`'s; how many steps each window
runs and the start of the ranks' agreement on one, `windows`'; its rank among the
ranks and a peer's end, `ranks`'.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import KwargsHandler, set_seed

from melissa_trainer.buffers import Sample
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.hf_trainer_names import refuse_train_resume
from melissa_trainer.core import process_group
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.dataset import Collate, ProcessBatch, ProcessSample, check_batch_options
from melissa_trainer.core.state import TrainerState
from melissa_trainer.core.stop_sync import StopSync, window_steps
from melissa_trainer.hooks import Event, Hook
from melissa_trainer.sources.ingest_transform import (
    BlockTransform,
    IngestTransform,
    SampleTransform,
)
from melissa_trainer.sources.source import Source, SourceError
from melissa_trainer.trainer.after_train import mark_exit
from melissa_trainer.trainer.direct_calls import DirectCalls
from melissa_trainer.trainer.ending import end_training
from melissa_trainer.trainer.failing import failed
from melissa_trainer.trainer.final_restart import refuse_final_restart
from melissa_trainer.trainer.held_out import HeldOutLosses
from melissa_trainer.trainer.late_end import end_sentence
from melissa_trainer.trainer.launch_join import join_launch
from melissa_trainer.trainer.losses import LossFn
from melissa_trainer.trainer.preempted import Preempted
from melissa_trainer.trainer.ranks import TrainerRanks
from melissa_trainer.trainer.roll_call import launch_roll_call
from melissa_trainer.trainer.run_waits import last_window_check, run_window, sources_started
from melissa_trainer.trainer.setup import (
    claim_output_dir,
    make_accelerator,
    make_data_path,
    make_hooks,
)
from melissa_trainer.trainer.source_failure import SourceFailure
from melissa_trainer.trainer.starting import refuse_second_train, setup_failed, start_training
from melissa_trainer.trainer.stepping import TrainerSteps
from melissa_trainer.trainer.stop_asked import ended_by_stop
from melissa_trainer.trainer.stop_cause import StopCause
from melissa_trainer.trainer.train_close import close_training
from melissa_trainer.trainer.untrained_exit import watch_until_trained
from melissa_trainer.trainer.windows import first_aligned, start_agreement, window_at

logger = logging.getLogger(__name__)


class OnlineTrainer(TrainerSteps, TrainerRanks):
    """Trains `model` on samples streamed into a buffer, on every rank of `accelerate launch`.

    Args:
        model: the network; prepared by Accelerate (device placement, DDP, mixed precision).
        args: the run's `TrainingArguments`.
        optimizer: an optimizer over `model`'s parameters.
        lr_scheduler: optional; stepped once per optimizer step (not per rank), saved in
            checkpoints.
        train_source: what fills this rank's buffer: a `Source`, an iterable of samples
            (mappings of field name -> array) or a factory `(rank, world_size) -> iterable`.
        process_sample: turns one sample into one example; by default each field becomes
            a tensor. The default `compute_loss` expects `(inputs, targets)` examples.
        collate_fn: stacks examples into a batch (default: one `torch.stack` per field).
        process_batch: instead of both: turns a `SampleBlock` (a batch of samples, one
            array per field) into a batch at once (see `StreamDataset`).
        ingest_sample: turns each sample, once, as the source puts it into the buffer,
            into the sample the buffer stores (a mapping of field name -> array): what
            depends on the sample alone is computed once, not at each draw (a reservoir
            draws a sample 10-20 times). `process_sample` / `process_batch` then see its
            result. A pure function; it may run in the receiver's thread;
            ``simulation_id`` and ``time_step`` are kept
            (`melissa_trainer.sources.ingest_transform`).
        ingest_block: instead: the same for a `SampleBlock` at once (a receiver puts a
            BATCH's steps as one block; an in-process source's samples come as blocks
            of one): a mapping of field name -> array with one row per sample.
        loss_fn: `loss_fn(model(inputs), targets)`, mean squared error by default.
        eval_dataset: a sequence of samples (like the stream's) for validation; each rank
            evaluates its share and the mean loss is reduced over ranks. With an
            `ingest_sample` or `ingest_block`, given as the stream's samples before it:
            each is transformed once, here (`eval_dataset` then holds the results).
        hooks: user hooks (instances; None: none), called after the source's and the
            built-in ones (see `hooks.trainer_hooks`).
        use_default_hooks: install the built-in hooks that `args` asks for
            (`hooks.default_hooks`; a `SimulationLossTracker` asked for by
            ``simulation_loss_steps`` is installed either way).
        kwargs_handlers: Accelerate's handlers, merged with its own (`setup.merged_handlers`).

    Override `compute_loss(model, batch)` for any other loss or batch layout, and then
    `compute_sample_losses` too if a hook asks for the per-sample losses (overrides
    `Hook.on_sample_losses`: the per-simulation losses, `simulation_losses`, which an
    adaptive sampler's study turns on).

    Rank 0 locks `args.output_dir` at construction, until `train()` returns or raises
    (see `melissa_trainer.trainer.output_lock`): a second trainer on the same directory is refused
    with `OutputDirLocked`, on every rank, naming the holder.

    Raises RuntimeError at construction under a launch with more processes on a node
    than it has visible GPUs (the message names the fixes), `OutputDirLocked` when
    another trainer uses `args.output_dir`, TypeError when a hook asks for the
    per-sample losses and the class overrides `compute_loss` alone
    (`sample_losses.check_loss_overrides`), ValueError when the source refuses
    `args` (`Source.hooks`: an adaptive study with ``simulation_loss_steps=0``).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        args: TrainingArguments,
        optimizer: torch.optim.Optimizer,
        lr_scheduler: Any | None = None,
        *,
        train_source: Source | Iterable[Any] | Callable[[int, int], Iterable[Any]],
        process_sample: ProcessSample | None = None,
        collate_fn: Collate | None = None,
        process_batch: ProcessBatch | None = None,
        ingest_sample: SampleTransform | None = None,
        ingest_block: BlockTransform | None = None,
        loss_fn: LossFn | None = None,
        eval_dataset: Sequence[Sample] | None = None,
        hooks: Iterable[Hook] | None = (),
        use_default_hooks: bool = True,
        kwargs_handlers: Iterable[KwargsHandler] | None = None,
    ) -> None:
        check_batch_options(process_sample, collate_fn, process_batch)  # before anything starts
        #: what the source applies to each sample before it puts it (None: nothing)
        self.ingest_transform = (
            None
            if ingest_sample is None and ingest_block is None
            else IngestTransform(ingest_sample, ingest_block)
        )
        self.args = args
        if isinstance(train_source, Source):  # (where its records are, before any failure)
            train_source.note_output_dir(args.output_dir)
        join_launch()  # (which launch's records this one reads and writes: before any)
        # (a torchrun restart after a stop for good: nothing to restart, before any cost)
        refuse_final_restart(train_source, args.output_dir)
        resumes = args.resume_from_checkpoint is not None  # (what a restart of this does)
        try:  # (a restart's process group that does not form: is another restart coming?)
            self.accelerator = acc = make_accelerator(args, kwargs_handlers)
        except BaseException as exc:
            setup_failed(train_source, exc, resumes)
            raise
        try:  # (the rest of the set-up failing on a restart, `claim_output_dir`: the same)
            set_seed(args.seed)
            self.model, self.optimizer = acc.prepare(model, optimizer)
            process_group.release_at_exit(self.model)  # its DDP's hold on the group, at exit
            # Not prepared: Accelerate would step it once per rank at every step.
            self.lr_scheduler = lr_scheduler
            if lr_scheduler is not None:
                acc.register_for_checkpointing(lr_scheduler)
            self.loss_fn: LossFn = loss_fn or torch.nn.functional.mse_loss
            # source -> buffer -> dataset, and the validation set transformed once (`setup`);
            # the source configured last, once output_dir is locked (`claim_output_dir`)
            data = make_data_path(
                args, acc, train_source, self.ingest_transform, eval_dataset,
                process_sample, collate_fn, process_batch,
            )  # fmt: skip
            self.source, self.buffer, self.dataset = data.source, data.buffer, data.dataset
            self.eval_dataset = eval_dataset = data.eval_dataset
            #: The last validation's loss per held-out simulation, with their parameters
            #: (`trainer.held_out.HeldOutLosses`: `.worst`, `.rows()`), when every validation
            #: sample carries a ``simulation_id``; None before, or without ids.
            self.held_out_losses: HeldOutLosses | None = None
            self.state = TrainerState(max_steps=args.max_steps)
            self.control = TrainerControl(clock=self.state)  # (dates a stop: `stop_step`)
            self.hooks = make_hooks(args, eval_dataset, self.source, hooks, use_default_hooks)
            self.stop_sync = StopSync(acc.device, acc.num_processes)
            self.stop_sync.watch.roll = launch_roll_call(acc.process_index, acc.num_processes)
            # what a step uses: the loss guard, the batches staged, the step's arithmetic,
            # the log's figures (`stepping`)
            self._set_up_steps(lr_scheduler, self.stop_sync.distributed)
            #: The signal that preempted the last `train()` (None: not preempted); the same
            #: on every rank, set before LOOP_END, so hooks may read it from there on.
            self.preempted_by: signal.Signals | None = None
            #: Why the last `train()` ended, in words, set before LOOP_END: "end of stream",
            #: "max_steps N reached", or `stop_asked.stop_words`'. "" before the end.
            self.ended_by = ""
            #: Whether a `train()` has started the source (`starting`): a trainer trains its
            #: stream once, and a second `train()` is refused naming the fix (htrial37)
            self.train_started = False
            self.train_ended = False  #: `train()` returned or raised (then `after_train`)
            self.direct_calls = DirectCalls()  #: user code's collective calls (`actions`)
            # One trainer per output_dir (`output_lock`): rank 0 locks it before any write there
            #: This run's identity (the same on every rank, new at each trainer): the stream's
            #: receivers refuse simulations of another run (see `Source.set_run_id`).
            self.run_id: str
            self._output_hold, self.run_id = claim_output_dir(
                args.output_dir,
                acc,
                self.source,
                self.stop_sync.watch,  # (its broadcast watched)
            )
            weakref.finalize(self, self._output_hold.release)  # a trainer dropped untrained
            # (a restart runs this command again: it resumes only if the command says so)
            self.source.note_restarts_resume(resumes)
            watch_until_trained(self)  # (this rank's failure before train(): noted)
        except BaseException as exc:
            setup_failed(getattr(self, "source", train_source), exc, resumes)
            raise

    @property
    def checkpoint_root(self) -> Path:
        return Path(self.args.output_dir) / "checkpoints"

    # -- the loop -----------------------------------------------------------------------

    def train(self, resume_from_checkpoint: None = None) -> TrainerState:
        """Train until the stream ends, `max_steps`, or a hook's stop; returns the state.

        Every rank returns at the same `global_step`. The source is stopped on return,
        also when an exception propagates.

        Raises:
            TypeError: `resume_from_checkpoint` given (HF's place; here the arguments').
            Preempted: SIGTERM or SIGINT reached a rank (main thread only; the previous
                handlers are back when this returns or raises). Every rank stops at the
                next stop synchronisation (within `stop_sync_steps` steps with one
                process, within twice that under several ranks, whose agreement is read a
                window after it starts: see the loop below; a rank waiting for data
                looks at the signal every `poll_interval` s at most), writes a checkpoint
                of that step, stops the source and fires the end hooks; a second signal
                exits at once (see `melissa_trainer.trainer.preemption`).
                A signal after the last stop synchronisation lets training end as it
                was about to (no Preempted), then ends the process (128 + the signal)
                as this returns (`PreemptionHandler.deliver_late`). The order of events
                is `Event`'s docstring.
        """
        refuse_train_resume(resume_from_checkpoint)
        refuse_second_train(self)  # (before the output_dir is held or a checkpoint read)
        args, state, control, hooks = self.args, self.state, self.control, self.hooks
        self._choose_loss()
        # several ranks: a hook's log, validation or save waits for the ranks' agreement,
        # any rank's request every rank's (`TrainerControl.defer`; LOAD's too)
        control.defer(self.stop_sync.distributed)
        mark_exit(self)  # (before `hold_term`'s, which runs first at exit: registered last)
        self._output_hold.hold()
        # SIGTERM/SIGINT from here on, resume and source start included: preemption (`starting`)
        preemption = self._preemption = start_training(self, self._output_hold.release)
        self.preempted_by = None
        failure = self._failure = SourceFailure(self)  # (held until agreed: `source_failure`)
        preempted = False  # (every rank raises `Preempted` at the same step)
        meet_bound: float | None = None  # (the ranks' last meeting's, agreed at the start)
        try:
            # (a barrier under several ranks, watched, agreeing the meeting's bound: `run_waits`)
            meet_bound = sources_started(self)
            hooks.fire(Event.SOURCE_STARTED, self, state, control)
            self.model.train()
            self.log_figures.started = time.perf_counter()
            hooks.fire(Event.TRAIN_START, self, state, control)
            hooks.check_own_states()  # a state no checkpoint keeps: refused before step 1
            micro, every = args.gradient_accumulation_steps, args.stop_sync_steps
            sync, guard = self.stop_sync, self._loss_guard
            sync.abandon()  # (an earlier train() that raised may have left one started)
            # the agreement on window k+1 is read after window k's steps, batches taken
            # ahead from the first aligned step on; a run's first window is one step
            ahead = sync.distributed  # (`windows`' docstring)
            aligned = first_aligned(state.global_step, every, state.max_steps)
            signum, begun = 0, state.global_step  # (`run_window` judges the steps after it)
            self.ended_by = ""
            while True:
                window = window_at(state.global_step, every, state.max_steps)
                if window <= 0:
                    self.ended_by = f"max_steps {state.max_steps} reached"
                    break
                if not sync.started:  # nothing agreed ahead: agree now (the host waits)
                    # Take the window's batches first: the ranks then agree on what all can do.
                    in_hand = failure.prefetch(window * micro, preemption.requested)
                    codes = (preemption.code, guard.window_code(), failure.code)
                    start_agreement(self, window * micro, in_hand, codes)
                stop, capacity, signum = sync.result()
                # every rank saves at this step, and fails (a preemption with it: named)
                if agreed := failure.at_agreement(sync.source_failed, signum, guard.check):
                    raise agreed
                guard.settle(sync.extra)  # a non-finite loss: raises on every rank
                control.grant(sync.asks)  # the hooks' requests that some rank made
                if stop or signum:  # (granted ones: at the end's action point)
                    self.ended_by = ended_by_stop(self, signum)  # (who asked: collective)
                    break
                if any(sync.asks):  # (granted: every rank alike; at this step, the last
                    self._perform_requested_actions()  # window's last: see TrainerControl)
                # As many steps as the rank with the most data has: a rank whose data
                # ran out first trains on its last batches again meanwhile (`pad`), so
                # no rank's data is left untrained (every rank runs the same steps).
                steps = min(capacity, sync.most) // micro
                self.dataset.pad(steps * micro)
                following = window_steps(state.global_step + steps, every, state.max_steps)
                if ahead and state.global_step >= aligned and steps == window and following > 0:
                    # the next window's batches now (pending, behind this window's): agreed on
                    held = failure.prefetch((steps + following) * micro, preemption.requested)
                    in_hand = held - steps * micro
                    codes = (preemption.code, guard.window_code(), failure.code)
                    start_agreement(self, following * micro, in_hand, codes)
                run_window(
                    self, steps, begun, self._training_step
                )  # (its steps watched: `run_waits`)
                if steps < window:  # the data ran out on every rank (or one cannot pad)
                    state.stream_ended = True
                    hooks.fire(Event.END_OF_STREAM, self, state, control)
                    if not control.should_rewind:
                        self.ended_by = "end of stream" + (
                            ""
                            if state.max_steps is None
                            else f", before max_steps {state.max_steps}"
                        )
                        break
                    control.should_rewind = False
                    hooks.fire(Event.PSEUDO_EPOCH_END, self, state, control)
                    self._perform_requested_actions(met=True)  # before the replay changes it
                    replayed = self.dataset.rewind()
                    state.pseudo_epoch += 1
                    logger.info(
                        "pseudo-epoch %d: replaying %d samples", state.pseudo_epoch, replayed
                    )
                    hooks.fire(Event.PSEUDO_EPOCH_START, self, state, control)
            self._output_hold.stopping()
            preemption.finish(signum)  # (a signal from now stops nothing: said)
            last_window_check(self, guard.check, failure, signum)  # (collective, watched)
            if signum:  # (hooks may read it from LOOP_END on)
                self.preempted_by = StopCause.signal_of(signum)  # (the code's signal)
            end_training(self, signum, self._perform_final_actions, preemption.end.decide)
        except Preempted:
            preempted = True
            raise
        except SourceError as exc:  # said once, in one line, with how to resume (`ending`)
            raise failure.said(exc, self._loss_guard.check) from exc.__cause__
        except (Exception, KeyboardInterrupt) as exc:  # (a hook, process_sample...: `failed`)
            if isinstance(exc, Exception) and (own := failure.unagreed(exc)) is not None:
                raise own from own.__cause__  # (its failure held; another rank is gone)
            failed(self, exc, preemption)
            raise
        finally:
            # (first: train() has ended, whatever of its close raises: `train_close`)
            self.train_ended = True
            if (error := sys.exc_info()[1]) is not None and not preempted:
                # a late signal's line promised where the end's checkpoint stands: said
                # now if train() failed before the end's action point decided it
                preemption.end.decide(end_sentence(self, error))
            close_training(self, self._output_hold, preemption, failure, preempted, meet_bound)
        preemption.deliver_late()  # (a signal after the end: as without the trainer)
        return state
