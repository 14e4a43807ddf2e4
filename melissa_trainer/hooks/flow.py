"""When to log, validate and save: the run's cadence, in one hook.

`FlowHook` decides *when*; the trainer decides *how* (`OnlineTrainer.log`, `evaluate`,
`save_checkpoint`); the rendering hooks (`ProgressHook`, `TensorBoardHook`) only show
what `on_log` and `on_validation_end` hand them. So TensorBoard gets its scalars
without the progress bar, and removing a renderer never changes what is computed.

A checkpoint is due every `save_steps` steps and every `save_seconds` of wall time. The
step cadence is read from `TrainerState` alone, identical on every rank. The clock is
not: ranks' clocks differ, and a save is a collective, so only rank 0's clock decides
(`TimedSave`): rank 0 asks through the stop flag (`StopSync.request_save`), and every
rank takes the agreed request at the first step end after the agreement is read
(`StopSync.take_save_request`), hence saves at the same step. The request rides the
next agreement, so the save comes up to one window after the clock said so with one
process, up to two under several ranks (whose agreement is read a window after it
starts): at most ``2 * stop_sync_steps`` steps late.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView


class FlowHook(Hook):
    """Requests a log every `logging_steps` steps, a validation every `eval_steps` steps
    and a checkpoint every `save_steps` steps (None: not periodically), then, after the
    last step (`on_loop_end`), whatever was not done at that step: a log, a validation
    (with `validate_at_end`, not on preemption: the time before the job is killed goes
    to the checkpoint, and the resumed run validates at its end) and a checkpoint (with
    `save_at_end`; on preemption the trainer writes one whatever this hook says).

    Built by `default_hooks` from `TrainingArguments`; built by hand, it asks for
    nothing but logs unless told (`eval_steps`, `save_steps`, `*_at_end`).

    Stateless for its steps: it decides from `state.global_step` and the steps of the
    last log, validation and checkpoint in `TrainerState`, so every rank requests the
    same actions at the same steps (they are collectives), also after a resume. With
    `save_seconds`, a checkpoint also every this many seconds of rank 0's `clock`
    (`TimedSave`, module docstring), counted from TRAIN_START and from each save.
    """

    def __init__(
        self,
        logging_steps: int,
        eval_steps: int | None = None,
        save_steps: int | None = None,
        *,
        validate_at_end: bool = False,
        save_at_end: bool = False,
        save_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("eval_steps", eval_steps), ("save_steps", save_steps)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if logging_steps < 1:
            raise ValueError(f"logging_steps must be >= 1, got {logging_steps}")
        self.logging_steps = logging_steps
        self.eval_steps = eval_steps
        self.save_steps = save_steps
        self.validate_at_end = validate_at_end
        self.save_at_end = save_at_end
        #: the wall-clock cadence of checkpoints (None: none)
        self.timed = None if save_seconds is None else TimedSave(save_seconds, clock)

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if self.timed is not None:
            self.timed.start(trainer)

    def on_step_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        step = state.global_step
        if step % self.logging_steps == 0:
            control.request_alike("should_log")
        if self.eval_steps and step % self.eval_steps == 0:
            control.request_alike("should_validate")
        if self.save_steps and step % self.save_steps == 0:
            control.request_alike("should_save")
        if self.timed is not None and self.timed.due(trainer, state):
            control.request_alike("should_save")

    def on_loop_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        step = state.global_step
        if step > state.last_log_step:
            control.request_alike("should_log")
        preempted = trainer.preempted_by is not None
        if self.validate_at_end and not preempted and state.last_eval_step != step:
            control.request_alike("should_validate")
        timed = self.timed is not None and self.timed.agreed(trainer, state)
        if (self.save_at_end or timed) and state.last_save_step != step:
            control.request_alike("should_save")

    def on_save(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        if self.timed is not None:
            self.timed.saved()


class TimedSave:
    """When a checkpoint is due by the wall clock: every `seconds` of rank 0's `clock`
    since the last save (or the start), agreed through the stop flag (module docstring).

    Rank 0 asks once the time is up (`StopSync.request_save`, with its step); every
    rank takes the agreed request at the same step end (`agreed`), and saves then
    unless a save at or after the step of the request (one of `save_steps`, or the end's)
    already covered it. The clock restarts at each save (`saved`) and at each agreed
    request that is not dropped, so that a save that fails (``on_save_error="continue"``)
    is tried again `seconds` later, not at every window. Rank-local state: the clock and whether a
    request is in flight; not checkpointed (a resumed run counts from its start).

    Raises:
        ValueError: `seconds` not a finite number > 0.
    """

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not (isinstance(seconds, int | float) and 0 < seconds < float("inf")):
            raise ValueError(f"save_seconds must be a finite number > 0 or None, got {seconds!r}")
        self.seconds, self._clock = float(seconds), clock
        self._since = clock()  # the clock at the last save, or at the start
        self._asked = False  # rank 0: a request is in flight

    def start(self, trainer: TrainerView) -> None:
        """At TRAIN_START: the clock starts; a request left by an earlier `train()` is
        dropped (on every rank alike)."""
        self._since, self._asked = self._clock(), False
        trainer.stop_sync.take_save_request()

    def due(self, trainer: TrainerView, state: TrainerState) -> bool:
        """At a step end: whether every rank saves at this step (the same answer on every
        rank); on rank 0, asks for a save when its time is up."""
        save = self.agreed(trainer, state)
        due = not self._asked and self._clock() - self._since >= self.seconds
        if due and trainer.is_main_process:
            trainer.stop_sync.request_save(state.global_step)
            self._asked = True
        return save

    def agreed(self, trainer: TrainerView, state: TrainerState) -> bool:
        """Takes the agreed request, if any: True unless a save at or after the step it
        was asked at already covered it."""
        asked_at = trainer.stop_sync.take_save_request()
        if asked_at is None:
            return False
        self._asked = False
        save = state.last_save_step is None or state.last_save_step < asked_at
        if save:  # (restarted here too: a save that fails is tried again `seconds` later)
            self._since = self._clock()
        return save

    def saved(self) -> None:
        """At SAVE (any checkpoint: the clock's, `save_steps`', the end's, the user's)."""
        self._since = self._clock()
