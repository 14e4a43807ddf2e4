"""`OnlineTrainer`: the training loop, hook dispatch and stop synchronisation.

Read `train()` from top to bottom: it is the loop of `hooks.base.Event`'s docstring.
The data path is one-directional: source -> buffer -> dataset -> this loop.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType, parse_flag_from_env, send_to_device, set_seed

from melissa_trainer import checkpoint as ckpt
from melissa_trainer.arguments import TrainingArguments
from melissa_trainer.buffers import Sample, make_buffer
from melissa_trainer.dataset import (
    Collate,
    ProcessBatch,
    ProcessSample,
    StreamDataset,
    check_batch_options,
)
from melissa_trainer.hooks import Event, Hook, HookList, default_hooks
from melissa_trainer.preemption import Preempted, PreemptionHandler
from melissa_trainer.sources import Source, as_source
from melissa_trainer.state import TrainerControl, TrainerState
from melissa_trainer.sync import StopSync

logger = logging.getLogger(__name__)

LossFn = Callable[[Any, Any], torch.Tensor]

#: per-rank trainer figures in each checkpoint's rank_R/ (see `OnlineTrainer._rank_state`)
_RANK_STATE = "trainer_rank.json"

# Where Accelerate's optimizer wrapper adds nothing to `step()` when there is no scaler.
_PLAIN_OPTIMIZER_STEP = {DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU}


def _cpu_only_launch() -> bool:
    """True for a multi-process launch on a machine without (visible) GPUs.

    `accelerate launch --multi_gpu` there starts the processes, but Accelerate only
    forms a (gloo) process group when told to run on CPU; otherwise every rank would
    train alone and the stop flag would not be shared. ``CUDA_VISIBLE_DEVICES=''``
    makes a GPU machine one of these (as does ACCELERATE_USE_CPU).

    Raises RuntimeError, before the trainer's Accelerator is made, when this node runs
    more processes (LOCAL_WORLD_SIZE, as torchrun sets it; 1 when unset) than it has
    visible GPUs: Accelerate would put two ranks on one GPU, which NCCL refuses at the
    first collective ("Duplicate GPU detected"). No silent fallback to CPU there (nor
    in Accelerate): a run that asked for GPUs would train on CPU unnoticed.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    if not torch.cuda.is_available() or parse_flag_from_env("ACCELERATE_USE_CPU"):
        return True  # the latter: Accelerate runs on CPU whatever it is told
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    gpus = torch.cuda.device_count()
    if local > gpus:
        raise RuntimeError(
            f"{local} processes on this node but {gpus} visible GPU(s), and NCCL cannot "
            f"share a GPU between ranks: launch at most {gpus} per node (--num_processes "
            f"{gpus} on one machine), or train on CPU (gloo) with CUDA_VISIBLE_DEVICES=''"
        )
    return False


class OnlineTrainer:
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
        loss_fn: `loss_fn(model(inputs), targets)`, mean squared error by default.
        eval_dataset: a sequence of samples (like the stream's) for validation; each rank
            evaluates its share and the mean loss is reduced over ranks.
        hooks: user hooks, called after the built-in ones (see `hooks.default_hooks`).
        use_default_hooks: install the built-in hooks that `args` asks for.

    Override `compute_loss(model, batch)` for any other loss or batch layout.

    Raises RuntimeError at construction under a launch with more processes on a node
    than it has visible GPUs (the message names the fixes).
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
        loss_fn: LossFn | None = None,
        eval_dataset: Sequence[Sample] | None = None,
        hooks: Iterable[Hook] = (),
        use_default_hooks: bool = True,
    ) -> None:
        check_batch_options(process_sample, collate_fn, process_batch)  # before anything starts
        self.args = args
        self.accelerator = Accelerator(
            cpu=_cpu_only_launch(),
            mixed_precision=args.mixed_precision,
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            step_scheduler_with_optimizer=False,
        )
        acc = self.accelerator
        set_seed(args.seed)
        self.model, self.optimizer = acc.prepare(model, optimizer)
        # Not prepared: Accelerate would step it once per rank at every step.
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None:
            acc.register_for_checkpointing(lr_scheduler)
        self.loss_fn: LossFn = loss_fn or torch.nn.functional.mse_loss
        if eval_dataset is not None and len(eval_dataset) == 0:
            raise ValueError("eval_dataset is empty: pass None to skip validation")
        self.eval_dataset = eval_dataset

        self.buffer = make_buffer(
            args.buffer,
            args.buffer_size,
            args.watermark,
            seed=args.seed + acc.process_index,
            max_sample_reuse=args.max_sample_reuse,
            sample_to_insert_ratio=args.sample_to_insert_ratio,
            sample_to_insert_tolerance=args.resolved_sample_to_insert_tolerance,
            retain=args.pseudo_epochs > 1,
        )
        if args.pseudo_epochs > 1 and args.buffer != "reservoir":
            logger.warning(
                "pseudo_epochs=%d with buffer=%s keeps every streamed sample in memory "
                "to replay it; use buffer='reservoir' to bound memory",
                args.pseudo_epochs,
                args.buffer,
            )
        self.source = as_source(train_source)
        self.source.configure(args.output_dir)
        self.dataset = StreamDataset(
            self.buffer,
            args.batch_size,
            process_sample,
            collate_fn,
            source=self.source,
            process_batch=process_batch,
        )
        self.state = TrainerState(max_steps=args.max_steps)
        self.control = TrainerControl()
        builtin = (
            default_hooks(args, has_eval=eval_dataset is not None) if use_default_hooks else []
        )
        self.hooks = HookList([*builtin, *hooks])
        self.stop_sync = StopSync(acc.device, acc.num_processes)
        self._move_batches = acc.device.type != "cpu"
        plain = acc.scaler is None and acc.distributed_type in _PLAIN_OPTIMIZER_STEP
        self._raw_optimizer = self.optimizer.optimizer if plain else None
        # Without accumulation or autocast, Accelerate's accumulate/autocast contexts and
        # its loss division are no-ops that still cost ~20 us a step: skip them.
        self._plain_step = (
            plain and args.gradient_accumulation_steps == 1 and args.mixed_precision == "no"
        )
        self._loss_sum = torch.zeros((), device=acc.device)
        self._loss_count = 0
        self._samples_since_log = 0
        # of those, the samples already added to `state.total_samples_seen` (by a save)
        self._samples_totaled = 0
        self._steps_since_log = 0
        self._last_log_time = time.perf_counter()
        #: The signal that preempted the last `train()` (None: not preempted); the same
        #: on every rank, set before LOOP_END, so hooks may read it from there on.
        self.preempted_by: signal.Signals | None = None

    # -- public properties ------------------------------------------------------------

    @property
    def is_main_process(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def process_index(self) -> int:
        return self.accelerator.process_index

    @property
    def num_processes(self) -> int:
        return self.accelerator.num_processes

    @property
    def checkpoint_root(self) -> Path:
        return Path(self.args.output_dir) / "checkpoints"

    # -- the loop -----------------------------------------------------------------------

    def train(self) -> TrainerState:
        """Train until the stream ends, `max_steps`, or a hook's stop; returns the state.

        Every rank returns at the same `global_step`. The source is stopped on return,
        also when an exception propagates.

        Raises:
            Preempted: SIGTERM or SIGINT reached a rank (main thread only; the previous
                handlers are back when this returns or raises). Every rank stops at the
                next stop synchronisation (within `stop_sync_steps` steps; a rank
                waiting for data looks at the signal every `poll_interval` s at most),
                writes a checkpoint of that step, stops the source and fires the end
                hooks; a second signal exits at once (see `melissa_trainer.preemption`).
                A signal after the last stop synchronisation lets training end as it
                was about to (no Preempted). The order of events is `Event`'s docstring.
        """
        args, state, control, hooks = self.args, self.state, self.control, self.hooks
        resume = ckpt.resolve_resume(args.resume_from_checkpoint, self.checkpoint_root)
        if resume is None and args.resume_from_checkpoint == "latest":
            logger.warning(
                "resume_from_checkpoint='latest': no checkpoint under %s, starting afresh",
                self.checkpoint_root,
            )
        first_window = 0  # steps of the first stop-sync window, if not stop_sync_steps
        if resume is not None:
            self.load_checkpoint(resume)
            first_window = self._window_left()
            hooks.fire(Event.LOAD, self, state, control, str(resume))
        self.source.start(self.buffer, self.process_index, self.num_processes)
        # SIGTERM/SIGINT from here on: stop at the next stop synchronisation (preemption)
        preemption = PreemptionHandler(on_force=self.source.stop).install()
        self.preempted_by = None
        try:
            if self.num_processes > 1:
                self.accelerator.wait_for_everyone()  # every rank's source has started
            self.source.on_all_ranks_started()
            self.model.train()
            self._last_log_time = time.perf_counter()
            hooks.fire(Event.TRAIN_START, self, state, control)
            micro = args.gradient_accumulation_steps
            signum = 0
            while True:
                window, first_window = first_window or args.stop_sync_steps, 0
                if state.max_steps is not None:
                    window = min(window, state.max_steps - state.global_step)
                if window <= 0:
                    break
                # Take the window's batches first: the ranks then agree on what all can do.
                available = self.dataset.prefetch(window * micro, preemption.requested)
                stop, available, signum = self.stop_sync.agree(
                    control.should_stop, available, preemption.signum
                )
                if stop or signum:
                    break
                for _ in range(available // micro):
                    self._training_step()
                if available // micro < window:  # the data ran out on some rank
                    state.stream_ended = True
                    hooks.fire(Event.END_OF_STREAM, self, state, control)
                    if not control.should_rewind:
                        break
                    control.should_rewind = False
                    hooks.fire(Event.PSEUDO_EPOCH_END, self, state, control)
                    self._perform_requested_actions()  # before the replay changes the buffer
                    replayed = self.dataset.rewind()
                    state.pseudo_epoch += 1
                    logger.info(
                        "pseudo-epoch %d: replaying %d samples", state.pseudo_epoch, replayed
                    )
                    hooks.fire(Event.PSEUDO_EPOCH_START, self, state, control)
            self._end_training(signum)
        finally:
            try:
                self.source.stop()
                self.hooks.close()
            finally:
                preemption.restore()
        return state

    def _end_training(self, signum: int) -> None:
        """After the loop, on every rank at the same step: LOOP_END, the final log,
        validation and save that hooks request there, the source stopped, TRAIN_END.

        `signum` (0: none) is the preemption signal the ranks agreed on: a checkpoint
        of this step is then written whatever the hooks asked, and `Preempted` raised
        after TRAIN_END.
        """
        state, control, hooks = self.state, self.control, self.hooks
        if signum:
            self.preempted_by = signal.Signals(signum)
            logger.warning(
                "%s: rank %d stopped at step %d, as every rank; writing a checkpoint",
                self.preempted_by.name,
                self.process_index,
                state.global_step,
            )
        hooks.fire(Event.LOOP_END, self, state, control)
        self._perform_requested_actions()
        if signum and state.last_save_step != state.global_step:
            self.save_checkpoint()  # collective: every rank agreed on signum
        self.source.stop()  # before the end hooks: no simulation runs while they do
        hooks.fire(Event.TRAIN_END, self, state, control)
        requested = control.pending()
        if requested:  # no action point is left to honour them: say so, never drop silently
            logger.warning(
                "a hook set %s after the last action point (in on_train_end, or in the "
                "events of the final log, validation or save): ignored; request them in "
                "on_loop_end",
                " and ".join(requested),
            )
        if signum:
            path = ckpt.checkpoint_path(self.checkpoint_root, state.global_step)
            preempted = Preempted(signum, state.global_step, str(path))
            if self.is_main_process:
                logger.warning("%s", preempted)  # uncaught, a SystemExit prints nothing
            raise preempted

    def _training_step(self) -> None:
        """One optimizer step over `gradient_accumulation_steps` pending micro-batches."""
        acc, state, control, hooks = self.accelerator, self.state, self.control, self.hooks
        hooks.fire(Event.STEP_START, self, state, control)
        for _ in range(self.args.gradient_accumulation_steps):
            batch, n = self.dataset.next_batch()
            if self._move_batches:
                batch = send_to_device(batch, acc.device, non_blocking=True)
            state.samples_seen += n
            self._samples_since_log += n
            hooks.fire(Event.BATCH_READY, self, state, control, batch)
            if self._plain_step:
                loss = self.compute_loss(self.model, batch)
                loss.backward()
                sync = True
            else:
                with acc.accumulate(self.model):
                    with acc.autocast():
                        loss = self.compute_loss(self.model, batch)
                    acc.backward(loss)
                sync = acc.sync_gradients
            loss = loss.detach()
            self._loss_sum += loss  # stays on the device: no sync per step
            self._loss_count += 1
            hooks.fire(Event.AFTER_BACKWARD, self, state, control, loss)
            if sync:
                self._optimizer_step()
        state.global_step += 1
        self._steps_since_log += 1
        hooks.fire(Event.STEP_END, self, state, control)
        self._perform_requested_actions()

    def _optimizer_step(self) -> None:
        """Optimizer and scheduler step, then zero the gradients.

        Without a grad scaler (no fp16) Accelerate's optimizer wrapper only forwards the
        call, but probes installed packages on every step (about 0.3 ms each here), so
        the wrapped optimizer is stepped directly.
        """
        if self._raw_optimizer is not None:
            self._raw_optimizer.step()
            self._raw_optimizer.zero_grad(set_to_none=True)
            stepped = True
        else:
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            stepped = not self.accelerator.optimizer_step_was_skipped
        if self.lr_scheduler is not None and stepped:
            self.lr_scheduler.step()

    def _perform_requested_actions(self) -> None:
        """An action point: the log, validation and save requested since the last one.

        The one place where these flags are cleared, each as its action starts: a
        request made by the action's own events (a save asked for in
        `on_validation_end`, say) is then performed here too when its action comes
        later, or at the next action point otherwise; never dropped.
        """
        control = self.control
        if control.should_log:
            control.should_log = False
            self.log()
        if control.should_validate:
            control.should_validate = False
            self.evaluate()
        if control.should_save:
            control.should_save = False
            self.save_checkpoint()

    def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """The loss of one batch; by default `loss_fn(model(inputs), targets)`."""
        if not (isinstance(batch, tuple | list) and len(batch) == 2):
            raise TypeError(
                "the default compute_loss expects batches of (inputs, targets): return a "
                "2-tuple from process_sample, or override OnlineTrainer.compute_loss"
            )
        inputs, targets = batch
        return self.loss_fn(model(inputs), targets)

    # -- actions requested by hooks --------------------------------------------------------

    def log(self) -> dict[str, float]:
        """Reduce the figures since the last log over ranks and fire LOG. Collective.

        `state.total_samples_seen` is exact afterwards (the sum of every rank's samples,
        also across a resume). The source's telemetry is summed over ranks, but for its
        `study_keys` (figures every rank counts in full), whose maximum is logged.
        """
        acc, state = self.accelerator, self.state
        stats = self.buffer.stats()
        elapsed = time.perf_counter() - self._last_log_time
        telemetry = self.source.telemetry()  # cumulative counters, the same keys on every rank
        study_keys = self.source.study_keys
        names = sorted(k for k in telemetry if k not in study_keys)
        study_names = sorted(k for k in telemetry if k in study_keys)
        untotaled = self._samples_since_log - self._samples_totaled
        local = [0.0, self._loss_count, self._samples_since_log, untotaled, len(self.buffer)]
        local += [stats.put, stats.got, stats.evicted, elapsed, *(telemetry[k] for k in names)]
        figures = torch.tensor(local, dtype=torch.float64, device=acc.device)
        figures[0] = self._loss_sum
        maxima = torch.tensor(
            [telemetry[k] for k in study_names], dtype=torch.float64, device=acc.device
        )
        if self.stop_sync.distributed:
            torch.distributed.all_reduce(figures)
            if study_names:
                torch.distributed.all_reduce(maxima, op=torch.distributed.ReduceOp.MAX)
        values = figures.tolist()
        loss_sum, loss_count, samples, new_total, size, put, got, evicted, elapsed_sum = values[:9]
        elapsed_mean = max(elapsed_sum / acc.num_processes, 1e-9)
        source_figures = {
            **dict(zip(names, values[9:], strict=True)),
            **dict(zip(study_names, maxima.tolist(), strict=True)),
        }
        logs = {
            "loss": loss_sum / loss_count if loss_count else float("nan"),
            "learning_rate": self._learning_rate(),
            "samples_per_second": samples / elapsed_mean,
            "steps_per_second": self._steps_since_log / elapsed_mean,
            "buffer_size": size / acc.num_processes,
            "buffer_fill": size / acc.num_processes / self.buffer.capacity,
            "buffer_put": put,
            "buffer_got": got,
            "buffer_evicted": evicted,
            **{f"source_{k}": source_figures[k] for k in sorted(source_figures)},
        }
        state.total_samples_seen += int(new_total)
        state.last_log_step = state.global_step
        if loss_count:
            state.last_loss = logs["loss"]
        state.append_log(logs)
        self._loss_sum.zero_()
        self._loss_count = self._samples_since_log = self._steps_since_log = 0
        self._samples_totaled = 0
        self._last_log_time = time.perf_counter()
        self.hooks.fire(Event.LOG, self, state, self.control, logs)
        return logs

    def _learning_rate(self) -> float:
        if self.lr_scheduler is not None:
            return float(self.lr_scheduler.get_last_lr()[0])
        return float(self.optimizer.param_groups[0]["lr"])

    def evaluate(self) -> dict[str, float]:
        """Mean loss over `eval_dataset`, each rank on its share, reduced. Collective.

        Records `metric_for_best_model` in the state (`best_metric`, `best_step`,
        `validations_since_best`: see `TrainerState.record_metric`) and the step in
        `state.last_eval_step`, before VALIDATION_END. Raises KeyError when the metrics
        lack `metric_for_best_model`.
        """
        if self.eval_dataset is None:
            raise ValueError("evaluate() needs an eval_dataset")
        acc, state, control = self.accelerator, self.state, self.control
        self.hooks.fire(Event.VALIDATION_START, self, state, control)
        mine = range(acc.process_index, len(self.eval_dataset), acc.num_processes)
        sums = torch.zeros(2, dtype=torch.float64, device=acc.device)
        self.model.eval()
        with torch.no_grad():
            for start in range(0, len(mine), self.args.batch_size):
                samples = [self.eval_dataset[i] for i in mine[start : start + self.args.batch_size]]
                batch = self.dataset.collate_samples(samples)
                if self._move_batches:
                    batch = send_to_device(batch, acc.device)
                with acc.autocast():
                    loss = self.compute_loss(self.model, batch)
                sums[0] += loss.double() * len(samples)
                sums[1] += len(samples)
        self.model.train()
        if self.stop_sync.distributed:
            torch.distributed.all_reduce(sums)
        total, count = sums.tolist()
        metrics = {"eval_loss": total / count}
        name = self.args.metric_for_best_model
        if name not in metrics:
            raise KeyError(
                f"metric_for_best_model is {name!r} but validation returned "
                f"{sorted(metrics)}: set it to one of them"
            )
        state.record_metric(metrics[name], self.args.greater_is_better)
        state.last_eval_step = state.global_step
        state.append_log(metrics)
        self.hooks.fire(Event.VALIDATION_END, self, state, control, metrics)
        return metrics

    # -- checkpoints --------------------------------------------------------------------------

    def save_checkpoint(self) -> Path:
        """Write a checkpoint of this step on every rank; returns its path. Collective.

        Idempotent: saving twice at one step rewrites the same checkpoint. Durable: every
        file is fsynced before the atomic rename, and the directories after it (see
        `checkpoint`'s module docstring); a save blocks training for that long.
        `state.total_samples_seen` is made exact first (one small all-reduce), so the
        checkpoint records every sample trained on up to this step.
        """
        acc, state = self.accelerator, self.state
        self._total_samples()
        state.last_save_step = state.global_step  # the checkpoint records its own step
        root = self.checkpoint_root
        if acc.is_main_process:
            ckpt.begin(root, state.global_step)
        acc.wait_for_everyone()
        staging = ckpt.staging_path(root, state.global_step)
        acc.save_state(str(staging), safe_serialization=True)
        rank_dir = ckpt.rank_path(staging, acc.process_index)
        self.buffer.save(rank_dir)
        self.dataset.save(rank_dir)
        ckpt.write_json(rank_dir / "source.json", self.source.state_dict())
        ckpt.write_json(rank_dir / _RANK_STATE, self._rank_state())
        if acc.is_main_process:
            (staging / "trainer_state.json").write_text(state.to_json())
            ckpt.write_json(staging / "hooks.json", self.hooks.state_dict())
            ckpt.write_json(staging / "training_args.json", self.args.to_dict())
        acc.wait_for_everyone()  # every rank's files are written
        ckpt.fsync_rank_files(staging, acc.process_index, acc.num_processes)
        acc.wait_for_everyone()
        final = ckpt.checkpoint_path(root, state.global_step)
        if acc.is_main_process:
            ckpt.commit(staging, final)
            removed = ckpt.rotate(root, self.args.max_to_keep)
            logger.info("saved %s (removed %s)", final, [p.name for p in removed])
        acc.wait_for_everyone()
        self.hooks.fire(Event.SAVE, self, state, self.control, str(final))
        return final

    def _total_samples(self) -> None:
        """Add every rank's samples not yet counted to `state.total_samples_seen`
        (otherwise done at the next log). Collective."""
        untotaled = self._samples_since_log - self._samples_totaled
        counts = torch.tensor([untotaled], dtype=torch.float64, device=self.accelerator.device)
        if self.stop_sync.distributed:
            torch.distributed.all_reduce(counts)
        self.state.total_samples_seen += int(counts.item())
        self._samples_totaled = self._samples_since_log

    def _rank_state(self) -> dict[str, Any]:
        """What differs between ranks, beside the buffer and the source: this rank's
        `samples_seen`, and its loss sum since the last log (so that the first log
        after a resume reports what it would have without the restart)."""
        return {
            "samples_seen": self.state.samples_seen,
            "loss_sum": float(self._loss_sum),
            "loss_count": self._loss_count,
        }

    def _window_left(self) -> int:
        """The steps left in the stop-sync window that a restored checkpoint was written
        in: the fewest whole steps pending on any rank (every rank took the window's
        batches when it began, the agreed number of steps being the fewest). Resuming
        with them keeps the windows, hence the data taken from the buffer at each step
        and the logged buffer figures, where they were without the restart. Collective.
        """
        steps = self.dataset.num_pending // self.args.gradient_accumulation_steps
        if self.stop_sync.distributed:
            fewest = torch.tensor([steps], dtype=torch.int64, device=self.accelerator.device)
            torch.distributed.all_reduce(fewest, op=torch.distributed.ReduceOp.MIN)
            steps = int(fewest.item())
        return steps

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore model, optimizer, scheduler, scaler, RNG, state, hooks, buffer, pending.

        See docs/resume.md for what is restored exactly and what user code sees again.
        """
        path = Path(path)
        ranks = ckpt.count_ranks(path)
        if ranks != self.num_processes:
            raise ValueError(
                f"checkpoint {path} was written by {ranks} training ranks but this run has "
                f"{self.num_processes}: resume with --num_processes {ranks}"
            )
        self.accelerator.load_state(str(path))
        self.state.load_state_dict(ckpt.read_json(path / "trainer_state.json"))
        self.state.max_steps = self.args.max_steps  # the new run's limit wins
        self.hooks.load_state_dict(ckpt.read_json(path / "hooks.json"))
        rank_dir = ckpt.rank_path(path, self.process_index)
        self.buffer.load(rank_dir)
        self.dataset.load(rank_dir)
        self.source.load_state_dict(ckpt.read_json(rank_dir / "source.json"))
        if (rank_dir / _RANK_STATE).is_file():  # absent from checkpoints of earlier versions
            mine = ckpt.read_json(rank_dir / _RANK_STATE)
            self.state.samples_seen = int(mine["samples_seen"])
            self._loss_sum.fill_(float(mine["loss_sum"]))
            self._loss_count = int(mine["loss_count"])
        self._samples_since_log = self._samples_totaled = self._steps_since_log = 0
        logger.info("resumed from %s at step %d", path, self.state.global_step)
