"""The trainer's progress (`TrainerState`) and the hooks' requests (`TrainerControl`).

`TrainerState` is the single serializable record of where training stands. Only the
trainer advances it; hooks read it. It is saved as JSON in every checkpoint and
restored on resume. Every counter that the built-in hooks decide *when* from (logging,
validation, saving, early stopping, pseudo-epochs) lives here: the steps of the last
log, validation and checkpoint, the best metric and the validations since it; those
hooks keep no counter of their own, so their cadence survives a resume. A user hook
that keeps its own counter saves it through `Hook.state_dict`.

`TrainerControl` is how hooks ask for actions. A hook sets a flag; the trainer performs
the action at the next action point and clears the flag there (see `TrainerControl`).
The flags are policy ("please save now"); the mechanism (how a checkpoint is written,
how the validation loss is reduced) belongs to the trainer.

Rank consistency: `TrainerState` is identical on every rank except `samples_seen`
(this rank's count). `should_log`, `should_validate` and `should_save` start collective
operations, which every rank must enter at the same step: under several ranks a hook's
request is kept (`TrainerControl.defer`) until the ranks agree on it, and every rank
performs it then, whichever ranks asked. `should_stop` may be requested by a single
rank: the trainer all-reduces it so that every rank stops at the same step.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from melissa_trainer.common.json_output import to_json

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


#: other libraries' control flags (HF `TrainerControl`) -> what to do here: set, they
#: would be plain attributes that nothing reads, so a ported callback never stopped
_OTHER_LIBRARIES_FLAGS: dict[str, str] = {
    "should_training_stop": "set should_stop (or call control.request_stop(reason))",
    "should_evaluate": "set should_validate",
    "should_epoch_stop": (
        "there is no epoch to end early in a stream: set should_stop to end training, "
        "or should_rewind in on_end_of_stream to replay the buffer"
    ),
}


def _unknown_flag(name: str) -> str:
    """Why `TrainerControl` has no attribute `name`, and what to set instead."""
    flags = ", ".join(n for n in _CONTROL_FIELDS if n.startswith("should_"))
    if name in _OTHER_LIBRARIES_FLAGS:
        hint = f"{name} is Hugging Face's flag, not one here: {_OTHER_LIBRARIES_FLAGS[name]}"
    else:
        close = difflib.get_close_matches(name, _CONTROL_FIELDS, n=1)
        hint = f"did you mean {close[0]}?" if close else "nothing would read it"
    return f"TrainerControl has no flag {name!r}: {hint} (its flags: {flags})"


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


@dataclass
class TrainerControl:
    """Actions requested by hooks, performed and cleared by the trainer.

    A flag may be set in any event; it stays set until the trainer performs its action
    at the next *action point*, and is cleared there, once, as that action starts (a
    request made by the action's own events is kept for the following action point).
    The action points (see `hooks.Event` for the whole loop):

    * `should_log`, `should_validate`, `should_save`: after every STEP_END; after
      PSEUDO_EPOCH_END (before the buffer is replayed); after LOOP_END. Under several
      ranks (`defer`), a hook's request is kept until the ranks' next agreement: the
      loss check of the next action point that the schedule (`hooks.flow.FlowHook`,
      alike on every rank) opens, the stop agreement read at the end of the window
      after the current one (there, an action point of its own), or PSEUDO_EPOCH_END's
      and LOOP_END's (twice at the end); every rank performs it there. One made in
      VALIDATION_END is agreed on right after that validation (`TrainerActions._act`).
      Performed in
      that order (log, validate, save), so a save requested in `on_validation_end` is
      written at the same point. A request left after the last action point (made in
      `on_train_end`, or in the events of the final log, validation or save) cannot be
      honoured: the trainer logs a warning naming it.
    * `should_stop`: at the next stop synchronisation (every `stop_sync_steps` steps;
      under several ranks the one after it, whose agreement starts after the flag is
      set: `OnlineTrainer.train`;
      every rank stops at the same step, and it may be set on one rank only). Never
      cleared: training ends.
    * `should_rewind`: at the next end of stream (END_OF_STREAM), where it is
      cleared and the buffer replayed as a new pseudo-epoch instead of stopping. One
      still set when training ends is reported like the other requests.

    Attributes:
        should_stop: end training at the next stop synchronisation.
        should_save: write a checkpoint (all ranks alike: a collective).
        should_validate: run validation (all ranks alike: a collective).
        should_log: compute and emit the training logs (all ranks alike: a collective).
        should_rewind: at end of stream, replay the samples retained in the buffer
            (all ranks alike).

    Setting any other attribute is an AttributeError naming the flag to set instead
    (Hugging Face's ``should_training_stop`` -> `should_stop`, ``should_evaluate`` ->
    `should_validate`; ``should_epoch_stop`` has no counterpart): a ported callback's
    request would otherwise be an attribute that nothing reads. So is setting
    `stop_step` or `clock` once made (`_INTERNAL`: the trainer's, read-only to hooks).
    """

    should_stop: bool = False
    should_save: bool = False
    should_validate: bool = False
    should_log: bool = False
    should_rewind: bool = False
    #: Under several ranks (`defer`): the collective requests (`ASKED`) that a hook made
    #: since the last meeting of the ranks, flag -> who set it, not yet agreed: they are
    #: performed where the ranks agree on them (`take_asks`, `grant`), not by this rank
    #: alone at its next action point (a request on one rank made the ranks' collectives
    #: fall out of step: htrial's `if state.is_world_process_zero: should_save`)
    asked: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: whether hooks' requests are deferred to the ranks' agreement (`defer`)
    deferring: bool = field(default=False, compare=False, repr=False)
    #: Why `should_stop` was set, in words ("" until it is): what `request_stop` was
    #: given, or who set the flag (the method's qualified name, ``Hook.on_log``), so
    #: that the end of the run can say why it stopped before `max_steps` or the stream's
    #: end. The first request wins; rank-local (the flag's other ranks do not know it).
    stop_reason: str = field(default="", compare=False)
    #: The step at which `should_stop` was first set (read from `clock`), None until it
    #: is or without a clock: under several ranks the other ranks' end-of-run words say
    #: it (`trainer.stop_asked`), the stop itself coming up to two windows later.
    stop_step: int | None = field(default=None, compare=False)
    #: The `TrainerState` whose `global_step` dates a stop request (set by the trainer;
    #: None: not dated).
    clock: Any = field(default=None, compare=False, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _CONTROL_FIELDS:  # a ported callback's flag would do nothing
            raise AttributeError(_unknown_flag(name))
        if name in _INTERNAL and name in self.__dict__:
            # (the trainer's own, set once by `__init__`, then only by this class: a
            # hook's write would redate or undate a stop, not be a request)
            raise AttributeError(_internal_field(name))
        if value and name in ASKED and self.__dict__.get("deferring"):
            # a hook's request under several ranks: kept for the ranks' agreement (who
            # set it found here, once per request: the cost is paid only then)
            frame = inspect.currentframe()
            setter = frame.f_back if frame is not None else None
            code = setter.f_code if setter is not None else None
            who = "" if code is None else getattr(code, "co_qualname", code.co_name)
            self.asked.setdefault(name, who)
            return
        if name == "should_stop" and value and self.__dict__.get("stop_step") is None:
            clock = self.__dict__.get("clock")  # (dated once: `stop_step`)
            if clock is not None:
                object.__setattr__(self, "stop_step", int(clock.global_step))
        # Who sets the flag is recorded here, once, when it is first set: hooks set
        # `control.should_stop = True` directly (the transformers idiom), and the cost
        # is paid only then, never per step.
        if name == "should_stop" and value and not self.__dict__.get("stop_reason"):
            frame = inspect.currentframe()  # this method's: the setter's is the one back
            setter = frame.f_back if frame is not None else None
            if setter is not None:
                code = setter.f_code
                who = getattr(code, "co_qualname", code.co_name)  # (3.11+: Class.method)
                object.__setattr__(self, "stop_reason", f"{who} set control.should_stop")
        object.__setattr__(self, name, value)

    def request_stop(self, reason: str) -> None:
        """Set `should_stop`, with `reason` (words a user reads at the end of the run:
        "eval_loss not better in 3 validations") as `stop_reason` unless one was
        given before."""
        if not self.stop_reason:
            object.__setattr__(self, "stop_reason", reason)
        self.should_stop = True

    def pending(self) -> list[str]:
        """The names of the set flags that ask for an action (all but `should_stop`),
        the requests kept for the ranks' agreement (`asked`) included."""
        names = ("should_log", "should_validate", "should_save", "should_rewind")
        return [name for name in names if getattr(self, name) or name in self.asked]

    def defer(self, on: bool) -> None:
        """With `on` (a run of several ranks), a hook's ``should_log``,
        ``should_validate`` or ``should_save`` set to True is kept in `asked` instead of
        set: the trainer agrees on the requests of every rank (`take_asks` on each, the
        maximum over ranks given back to `grant`) and every rank performs them at the
        same step. The library's schedule, identical on every rank, sets its flags with
        `request_alike`. Off: flags are set as they are asked (one process)."""
        object.__setattr__(self, "deferring", bool(on))
        self.asked.clear()

    def request_alike(self, name: str) -> None:
        """Set the flag `name` (of `ASKED`) now, deferring or not: for a request that
        every rank makes at the same step (`hooks.flow.FlowHook`'s schedule, decided from
        `TrainerState`; the end's), which needs no agreement."""
        if name not in ASKED:
            raise ValueError(f"request_alike: {name!r} is not one of {ASKED}")
        object.__setattr__(self, name, True)

    def take_asks(self) -> tuple[int, int, int]:
        """This rank's requests kept since the last `take_asks`, one 0/1 per flag of
        `ASKED` (in its order), for the ranks' agreement; forgets them."""
        asks = tuple(int(name in self.asked) for name in ASKED)
        self.asked.clear()
        return asks  # type: ignore[return-value]

    def grant(self, agreed: Sequence[int]) -> None:
        """Set the flags that the ranks' agreement on `take_asks` (the maximum over
        ranks, one number per flag of `ASKED`) says some rank asked for: performed at
        the next action point, which every rank then reaches at the same step."""
        for name, asked in zip(ASKED, agreed, strict=False):
            if asked:
                object.__setattr__(self, name, True)


#: the requests that start collectives, in the order of their agreement's numbers
ASKED = ("should_log", "should_validate", "should_save")

#: the only attributes a `TrainerControl` takes (`__setattr__`)
_CONTROL_FIELDS = tuple(f.name for f in dataclasses.fields(TrainerControl))
#: its fields that are the trainer's, not flags: set by `__init__` (``clock=``), then
#: by `TrainerControl` only, never by a hook's ``control.NAME = ...``
_INTERNAL = ("stop_step", "clock")


def _internal_field(name: str) -> str:
    """Why a hook may not set `TrainerControl`'s internal field `name`."""
    flags = ", ".join(n for n in _CONTROL_FIELDS if n.startswith("should_"))
    return (
        f"TrainerControl's {name} is the trainer's, not a flag a hook sets (the step "
        f"should_stop was first set at, dated by the trainer's state): set should_stop "
        f"or call control.request_stop(reason) to stop (its flags: {flags})"
    )
