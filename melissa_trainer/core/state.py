"""The trainer's progress (`TrainerState`), saved in every checkpoint.

`TrainerState` is the single serializable record of where training stands. Only the
trainer advances it; hooks read it. It is saved as JSON in every checkpoint and
restored on resume. Every counter that the built-in hooks decide *when* from (logging,
validation, saving, early stopping, pseudo-epochs) lives here: the steps of the last
log, validation and checkpoint, the best metric and the validations since it; those
hooks keep no counter of their own, so their cadence survives a resume. A user hook
that keeps its own counter saves it through `Hook.state_dict`.

Rank consistency: `TrainerState` is identical on every rank except `samples_seen`
(this rank's count).

The hooks' requests, `TrainerControl`, are in `core.control`; importing them from here
(``from melissa_trainer.core.state import TrainerControl``, the path before the split)
still works and gives the same class.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from melissa_trainer.common.json_output import to_json

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.core.control import TrainerControl as TrainerControl

#: the file of a checkpoint that holds `TrainerState` (and marks a directory as one)
STATE_FILE = "trainer_state.json"
#: each rank's own trainer figures (its `samples_seen`, its loss since the last log),
#: under ``rank_R/``
RANK_STATE_FILE = "trainer_rank.json"


@dataclass
class TrainerState:
    """Progress counters of one training run.

    Attributes:
        global_step: optimizer steps taken (a step spans `gradient_accumulation_steps`
            micro-batches).
        samples_seen: samples consumed by *this rank* (including re-draws); exact, also
            after a resume (each rank's count is in its part of the checkpoint); after
            a resume on another number of ranks, the old ranks' sum dealt out evenly
            (`share_samples_seen`).
        total_samples_seen: samples consumed by all ranks (the sum of `samples_seen`),
            brought up to date at each log and each checkpoint (a collective then):
            between them it lags behind. Exact after a resume.
        pseudo_epoch: 0 while the stream is live; incremented at each replay of the
            buffer after the stream has ended.
        stream_ended: the stream has ended on at least one rank (its data is exhausted).
        best_metric: best finite value of `metric_for_best_model` so far (lowest, or
            highest with `greater_is_better`); None before the first validation. The one
            best metric of a run: `EarlyStoppingHook` reads it, nothing else keeps one.
        best_step: `global_step` at which `best_metric` was reached.
        validations_since_best: validations since the one that set `best_metric`, or
            since the start while there is none (0: the last validation set it; a
            non-finite value never does). `EarlyStoppingHook`'s patience counts these.
        last_log_step: `global_step` of the last log (0: none yet).
        last_eval_step: `global_step` of the last validation (None: none yet).
        last_save_step: `global_step` of the last checkpoint (None: none yet); a
            checkpoint records its own step here.
        max_steps: the step limit, or None when the stream decides.
        last_loss: training loss (mean over ranks) at the last log step.
        log_history: the most recent logged dictionaries (bounded, newest last).
        history: the identity of the training (16 hex digits), drawn when a run starts
            afresh, kept by every resume, the same on every rank; None until then, and
            in checkpoints of versions before it. ``latest`` tells another training's
            checkpoint by it (`checkpoint.history`).
    """

    global_step: int = 0
    samples_seen: int = 0
    total_samples_seen: int = 0
    pseudo_epoch: int = 0
    stream_ended: bool = False
    best_metric: float | None = None
    best_step: int | None = None
    validations_since_best: int = 0
    last_log_step: int = 0
    last_eval_step: int | None = None
    last_save_step: int | None = None
    max_steps: int | None = None
    last_loss: float | None = None
    log_history: list[dict[str, float]] = field(default_factory=list)
    history: str | None = None

    #: How many entries of `log_history` are kept (the state stays small).
    LOG_HISTORY_LEN = 100

    if not TYPE_CHECKING:  # (seen by a type checker, any attribute would type-check)

        def __getattr__(self, name: str) -> Any:
            # (a missing attribute only) a Hugging Face `TrainerState` field that a ported
            # callback reads is named with what to read here, not a bare AttributeError
            if name in _HF_STATE_FIELDS:
                raise AttributeError(
                    f"TrainerState has no {name!r} (Hugging Face's): {_HF_STATE_FIELDS[name]}"
                )
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def append_log(self, logs: dict[str, float]) -> None:
        """Record `logs` (with the current step) in the bounded history."""
        self.log_history.append({"step": float(self.global_step), **logs})
        del self.log_history[: -self.LOG_HISTORY_LEN]

    def record_metric(self, metrics: dict[str, float], name: str, greater_is_better: bool) -> bool:
        """Record a validation's `metrics[name]` (`name`: `metric_for_best_model`); True
        if it is the new best.

        Called by the trainer once per validation. A NaN or infinite value never becomes
        the best (it would then never be beaten) and counts as no improvement. A `name`
        without the ``eval_`` prefix that the metrics have with it (``loss_p99``) is
        read with it, as transformers' Trainer does. Raises KeyError, naming the metrics
        there are, when `name` is not among them.
        """
        if name not in metrics and f"eval_{name}" in metrics:
            name = f"eval_{name}"
        if name not in metrics:
            raise KeyError(
                f"metric_for_best_model is {name!r} but validation returned "
                f"{sorted(metrics)}: set it to one of them"
            )
        value, best = metrics[name], self.best_metric
        improved = math.isfinite(value) and (
            best is None or (value > best if greater_is_better else value < best)
        )
        if improved:
            self.best_metric, self.best_step = value, self.global_step
            self.validations_since_best = 0
        else:
            self.validations_since_best += 1
        return improved

    def state_dict(self) -> dict[str, Any]:
        """A JSON-serializable copy of every field but `samples_seen`: the state of all
        ranks (`samples_seen` is each rank's own, kept by the checkpoint's per-rank
        ``trainer_rank`` part, `checkpoint.registry`)."""
        state = dataclasses.asdict(self)
        del state["samples_seen"]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the fields from `state_dict()`; unknown keys are an error, missing
        ones (from checkpoints of earlier versions) keep their defaults."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(state) - names
        if unknown:
            raise ValueError(f"unknown TrainerState fields in checkpoint: {sorted(unknown)}")
        for key, value in state.items():
            setattr(self, key, value)

    def to_json(self) -> str:
        """The state as indented JSON (non-finite floats become null)."""
        return to_json(self.state_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainerState:
        state = cls()
        state.load_state_dict(json.loads(text))
        return state


#: Hugging Face `TrainerState` fields -> what to read here (a hook's arguments are
#: `(trainer, state, control)`: HF's `args` is ``trainer.args``)
_HF_STATE_FIELDS: dict[str, str] = {
    "epoch": "no epochs in a stream: read state.global_step, or state.pseudo_epoch "
    "(replays of the buffer after the stream)",
    "num_train_epochs": "no epochs in a stream: state.max_steps, or None",
    "is_world_process_zero": "read trainer.is_main_process (a hook's first argument)",
    "is_local_process_zero": "read trainer.accelerator.is_local_main_process",
    "logging_steps": "read trainer.args.logging_steps",
    "eval_steps": "read trainer.args.eval_steps",
    "save_steps": "read trainer.args.save_steps",
    "train_batch_size": "read trainer.args.batch_size (per device)",
    "best_model_checkpoint": "none: state.best_step is the step of state.best_metric",
    "total_flos": "none here",
    # newer transformers (htrial44: a bare AttributeError before)
    "best_global_step": "read state.best_step (the global_step of state.best_metric)",
    "num_input_tokens_seen": "none: state.total_samples_seen counts samples, all ranks",
    "stateful_callbacks": "a hook's own state_dict() / load_state_dict(), kept in every "
    "checkpoint under its name",
}


def share_samples_seen(counts: Sequence[int], rank: int, world_size: int) -> int:
    """Rank `rank`'s `samples_seen` after a resume on `world_size` ranks from a
    checkpoint whose ranks had seen `counts` (one per old rank): their sum dealt out
    evenly, the lower ranks taking one more while the remainder lasts. The sum over
    the new ranks is the old sum (`total_samples_seen` stays the sum of `samples_seen`);
    which rank counts a sample seen before the resize means nothing any more. Pure."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not one of {world_size} ranks")
    whole, left = divmod(sum(int(n) for n in counts), world_size)
    return whole + (1 if rank < left else 0)
