"""`TrainerActions`: what hooks ask `OnlineTrainer` to do, a base class of it.

A hook requests a log, a validation or a save by setting `TrainerControl`'s flags; the
loop performs them at its action points (`_perform_requested_actions`: after each step,
before a pseudo-epoch's replay, at the end). `log`, `evaluate`, `save_checkpoint` and
`load_checkpoint` are also public: user code may call them between steps. Each is
collective (every rank calls it at the same step; under several ranks, a hook's call
of the first three is a request of its flag instead: `_hook_asks`) and delegates to its
module: `reporting` for the logs and validation, `checkpointing` for the checkpoints. The loss
check that comes first (`LossGuard.check`, an all-reduce) runs inside the trainer's wait
watch, as their collectives do.

Thread-safety: the training thread only, as the trainer.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.loss_guard import LossGuard
from melissa_trainer.trainer import checkpointing, reporting
from melissa_trainer.trainer.after_train import meet_after_train
from melissa_trainer.trainer.dir_lost import check_output_dir
from melissa_trainer.trainer.hf_keywords import RefusesHFKeywords

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer
    from melissa_trainer.trainer.output_hold import OutputDirHold
    from melissa_trainer.trainer.preemption import PreemptionHandler

__all__ = ["TrainerActions"]

logger = logging.getLogger(__name__)


class TrainerActions(RefusesHFKeywords):
    """The actions of `OnlineTrainer` (which sets the attributes declared here)."""

    control: TrainerControl
    model: torch.nn.Module
    #: stops training at a non-finite loss, before any checkpoint holds it
    _loss_guard: LossGuard
    _output_hold: OutputDirHold
    #: the running `train()`'s preemption handler (None outside one): a stop it was asked
    #: for, whose checkpoint a removed output_dir will not hold, is said (`dir_lost`)
    _preemption: PreemptionHandler | None = None

    def _as_trainer(self) -> OnlineTrainer:
        """This object as the `OnlineTrainer` it is (the one class built on this one),
        which `reporting` and `checkpointing` read."""
        return cast("OnlineTrainer", self)

    def _perform_requested_actions(self, met: bool = False) -> None:
        """An action point: the log, validation and save requested since the last one.

        The one place where these flags are cleared, each as its action starts: a
        request made by the action's own events (a save asked for in
        `on_validation_end`, say) is then performed here too when its action comes
        later, or at the next action point otherwise; never dropped.

        Under several ranks, a hook's requests wait in `TrainerControl.asked` for the
        ranks' agreement; only the flags set alike on every rank (the schedule's, the
        agreed ones) make a rank enter here, so every rank enters at the same steps.
        Inside, the loss check's all-reduce carries the kept requests (`_act`); after a
        validation, one more small all-reduce agrees on those its events made, so that a
        save asked in `on_validation_end` (the best model's, Hugging Face's
        ``on_evaluate``) is written at the validated step, as with one process.
        `met`: every rank is here whatever its flags (a pseudo-epoch's end, the end of
        training): enter to agree on the kept requests even when no flag is set.
        """
        control = self.control
        meet = met and control.deferring
        if not (meet or control.should_log or control.should_validate or control.should_save):
            return
        # rank 0: its directory removed or its lock file replaced: stop before writing there
        self._check_output_dir()
        # the training thread's own work (a rank-0 part: a save's rotation; its hooks):
        # another rank's starvation watch does not call a rank 0 in it deadlocked
        work = self._as_trainer().hooks.work
        outer = None if work is None else work.work_began()
        try:  # (no step expected meanwhile: the window's span of steps paused, `run_waits`)
            with self._as_trainer().stop_sync.watch.pause():
                self._act(control)
        finally:
            if work is not None:
                work.work_ended(outer)

    def _perform_final_actions(self) -> None:
        """The end's action point, every rank there: under several ranks twice, so that
        a request a hook kept in the events of the end's log or validation (a save asked
        in `on_validation_end`) is agreed on and performed too, as one that a single
        process performs at the same point."""
        self._perform_requested_actions(met=True)
        if self.control.deferring:
            self._perform_requested_actions(met=True)

    def _act(self, control: TrainerControl) -> None:
        # nothing logged, validated or saved past a NaN loss; the action point's first
        # collective, where a rank held by a late one waits: watched (`reporting.watched`)
        # (several ranks: the hooks' requests kept on any rank ride its all-reduce, and
        # are performed here by every rank: `TrainerControl.defer`)
        asks = control.take_asks() if control.deferring else ()
        with self._watched_check("its log, validation or save"):
            control.grant(self._loss_guard.check_agreeing(asks))
        if control.should_log:
            control.should_log = False
            self.log()
        if control.should_validate:
            control.should_validate = False
            if self._as_trainer().eval_dataset is None:  # only a hook asks here: eval_steps
                # without an eval_dataset is refused before training starts
                raise ValueError(
                    "a hook set control.should_validate, but this trainer has no "
                    "eval_dataset to validate on: pass OnlineTrainer(..., eval_dataset=...), "
                    "or do not set it"
                )
            self.evaluate()
            if control.deferring:  # (a save asked in on_validation_end: written here too)
                with self._watched_check("its save"):
                    control.grant(self._loss_guard.check_agreeing(control.take_asks()))
        if control.should_save:
            control.should_save = False
            self.save_checkpoint()

    def _hook_in_train(self) -> str | None:
        """The hook method firing now (its qualified name) when a direct call is a hook's
        inside `train()` under several ranks (`TrainerControl.deferring`), else None.
        Only inside `train()`: after it no agreement would come, and a hook fired by a
        call then, every rank's, runs it at once (`after_train` checking the ranks)."""
        trainer = self._as_trainer()
        firing = trainer.hooks.firing
        training = trainer.train_started and not trainer.train_ended
        if not (self.control.deferring and firing is not None and training):
            return None
        return str(getattr(firing, "__qualname__", repr(firing)))

    def _hook_asks(self, call: str, flag: str, returns: str) -> bool:
        """Whether this direct call of `call` (``log``, ``evaluate``, ``save_checkpoint``)
        is a hook's under several ranks, made a request of `flag` instead: True then.

        A hook may make it on one rank only (Hugging Face's ``if
        state.is_world_process_zero: trainer.save_model()``, here ``if
        trainer.is_main_process: trainer.save_checkpoint()``): performed at once, it
        entered the action's collectives while the other ranks went on to their next
        step, and the run died in gloo ("Received data size doesn't match", a SIGABRT).
        Kept as the hook's flag (`TrainerControl.asked`, who asked: the hook's method),
        every rank performs it at the ranks' next agreement, as a flag the hook set;
        the call returns `returns` here, said once per call at WARNING (its figures
        reach the hook's on_log, on_validation_end or on_save). One process, outside a
        hook (the loop's own action points), or outside `train()`: not a request."""
        trainer = self._as_trainer()
        who = self._hook_in_train()
        if who is None:
            return False
        self.control.keep(flag, who)
        said = trainer.direct_calls.said
        if call not in said:
            said.add(call)
            logger.warning(
                "trainer.%s() called in a hook (%s) under %d ranks: kept as a request, "
                "control.%s, which every rank performs at the ranks' next agreement (a "
                "call on one rank alone would enter collectives the others do not); it "
                "returns %s here. Setting control.%s = True asks the same without this "
                "warning",
                call, who, trainer.num_processes, flag, returns, flag,
            )  # fmt: skip
        return True

    def log(self) -> dict[str, float]:
        """Reduce the figures since the last log over ranks and fire LOG. Collective.

        `state.total_samples_seen` is exact afterwards (the sum of every rank's samples,
        also across a resume), `state.last_log_step` is this step. The source's
        telemetry is summed over ranks, but for its `study_keys` (figures every rank
        counts in full), whose maximum is logged (see `LogFigures.reduce`).

        Called in a hook under several ranks: a request of ``control.should_log``,
        performed by every rank at their next agreement; returns {} (`_hook_asks`).
        """
        if self._hook_asks("log", "should_log", "{}"):
            return {}
        meet_after_train(self._as_trainer(), "log")
        return reporting.log(self._as_trainer())

    def evaluate(self) -> dict[str, float]:
        """Mean loss over `eval_dataset` (`eval_loss`), each rank on its share, reduced;
        fires VALIDATION_START and VALIDATION_END. Collective.

        Records `metric_for_best_model` in the state (`best_metric`, `best_step`,
        `validations_since_best`: see `TrainerState.record_metric`) and the step in
        `state.last_eval_step`, before VALIDATION_END. Raises ValueError without an
        `eval_dataset`, KeyError when the metrics lack `metric_for_best_model`.

        Called in a hook under several ranks (with an `eval_dataset`): a request of
        ``control.should_validate``, performed by every rank at their next agreement;
        returns {} (`_hook_asks`).
        """
        trainer = self._as_trainer()
        if trainer.eval_dataset is not None and self._hook_asks(
            "evaluate", "should_validate", "{}"
        ):
            return {}
        meet_after_train(trainer, "evaluate")
        return reporting.evaluate(self._as_trainer())

    def save_checkpoint(self) -> Path | None:
        """Write a checkpoint of this step on every rank; returns its path. Collective.

        A failure on any rank (a full disk) removes the partial checkpoint and raises
        `CheckpointSaveError` on every rank, or, with ``on_save_error="continue"``, is
        logged and returns None. The checkpoint holds a manifest of its files' hashes,
        written last (see `melissa_trainer.checkpoint.manifest`).

        Idempotent: saving twice at one step rewrites the same checkpoint. Durable: every
        file is fsynced before the atomic rename, and the directories after it (see
        `checkpoint`'s module docstring); a save blocks training for that long.
        `state.total_samples_seen` is made exact first (one small all-reduce), so the
        checkpoint records every sample trained on up to this step; `state.last_save_step`
        is this step. Fires SAVE once the checkpoint is in place.

        Raises `NonFiniteLossError` (on every rank, writing nothing) when a training
        loss since the last check, or a weight, is NaN or infinite.

        Raises `dir_lost.OutputDirLost` (rank 0, writing nothing) when `output_dir` was
        removed or its lock file replaced while this trainer trains.

        Called in a hook under several ranks: a request of ``control.should_save``,
        performed by every rank at their next agreement; returns None (`_hook_asks`).
        """
        if self._hook_asks("save_checkpoint", "should_save", "None"):
            return None
        meet_after_train(self._as_trainer(), "save_checkpoint")
        with self._watched_check("its checkpoint"):
            self._loss_guard.check(self.model.parameters())
        # (rank 0: gone, a save would make it again; a preemption's stop said: `dir_lost`)
        self._check_output_dir()
        return checkpointing.save_checkpoint(self._as_trainer())

    def _check_output_dir(self) -> None:
        """`dir_lost.check_output_dir`, told of a preemption's stop asked for, if any."""
        cause = None if self._preemption is None else self._preemption.cause
        check_output_dir(self._output_hold, cause, self._as_trainer().checkpoint_root)

    def _watched_check(self, before: str) -> AbstractContextManager[None]:
        """The trainer's wait watch around a loss check (`LossGuard.check`: an all-reduce
        under several ranks) at this step, `before` the action it guards."""
        step = self._as_trainer().state.global_step
        at = f"step {step}'s loss check before {before} (an all-reduce)"
        return reporting.watched(self._as_trainer(), at)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore model, optimizer, scheduler, scaler, RNG, state, hooks, buffer, pending.

        See docs/resume.md for what is restored exactly and what user code sees again.
        A checkpoint written by another number of ranks is resharded: each rank takes
        its share of every per-rank part (`melissa_trainer.checkpoint.reshard`). Raises
        ValueError when it cannot be (a source that cannot reshard, another buffer kind:
        before anything is loaded), `CheckpointError` naming the file when one does not
        load (on every rank). Collective. It does not verify the manifest: `train()`
        does, when it resumes.

        Under several ranks: refused in a hook during `train()` (`RuntimeError` naming
        the call and the fix: a load on one rank alone entered a collective the others
        never made; no agreement could make every rank load at one step); after
        `train()`, it checks in first as the other calls do (`meet_after_train`).
        """
        trainer = self._as_trainer()
        who = self._hook_in_train()
        if who is not None:
            raise RuntimeError(
                f"trainer.load_checkpoint() called in a hook ({who}) under "
                f"{trainer.num_processes} ranks during train(): a load is a collective "
                f"that every rank must make at the same step, which no hook's call can "
                f"promise; resume with TrainingArguments(resume_from_checkpoint=...), or "
                f"call it on every rank before or after train()"
            )
        meet_after_train(trainer, "load_checkpoint")
        checkpointing.load_checkpoint(trainer, Path(path))
