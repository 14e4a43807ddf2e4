"""The trainer's progress (`TrainerState`) and the hooks' requests (`TrainerControl`).

`TrainerState` is the single serializable record of where training stands. Only the
trainer advances it; hooks read it. It is saved as JSON in every checkpoint and
restored on resume, so every counter that decides *when* something happens (logging,
validation, saving, stopping) lives here and nowhere else.

`TrainerControl` is how hooks ask for actions. A hook sets a flag; the trainer performs
the action at the next point where it is allowed and clears the flag. The flags are
policy ("please save now"); the mechanism (how a checkpoint is written, how the
validation loss is reduced) belongs to the trainer.

Rank consistency: `TrainerState` is identical on every rank except `samples_seen`
(this rank's count). `should_log`, `should_validate` and `should_save` start collective
operations, so hooks must request them identically on every rank: decide from
`TrainerState`, never from rank-local data. `should_stop` may be requested by a single
rank: the trainer all-reduces it so that every rank stops at the same step.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainerState:
    """Progress counters of one training run.

    Attributes:
        global_step: optimizer steps taken (a step spans `gradient_accumulation_steps`
            micro-batches).
        samples_seen: samples consumed by *this rank* (including re-draws); exact, also
            after a resume (each rank's count is in its part of the checkpoint).
        total_samples_seen: samples consumed by all ranks (the sum of `samples_seen`),
            brought up to date at each log and each checkpoint (a collective then):
            between them it lags behind. Exact after a resume.
        pseudo_epoch: 0 while the stream is live; incremented at each replay of the
            buffer after the stream has ended.
        stream_ended: the stream has ended on at least one rank (its data is exhausted).
        best_metric: best validation metric so far (see `metric_for_best_model`).
        best_step: `global_step` at which `best_metric` was reached.
        max_steps: the step limit, or None when the stream decides.
        last_loss: training loss (mean over ranks) at the last log step.
        log_history: the most recent logged dictionaries (bounded, newest last).
    """

    global_step: int = 0
    samples_seen: int = 0
    total_samples_seen: int = 0
    pseudo_epoch: int = 0
    stream_ended: bool = False
    best_metric: float | None = None
    best_step: int | None = None
    max_steps: int | None = None
    last_loss: float | None = None
    log_history: list[dict[str, float]] = field(default_factory=list)

    #: How many entries of `log_history` are kept (the state stays small).
    LOG_HISTORY_LEN = 100

    def append_log(self, logs: dict[str, float]) -> None:
        """Record `logs` (with the current step) in the bounded history."""
        self.log_history.append({"step": float(self.global_step), **logs})
        del self.log_history[: -self.LOG_HISTORY_LEN]

    def state_dict(self) -> dict[str, Any]:
        """A JSON-serializable copy of every field."""
        return dataclasses.asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the fields from `state_dict()`; unknown keys are an error."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(state) - names
        if unknown:
            raise ValueError(f"unknown TrainerState fields in checkpoint: {sorted(unknown)}")
        for key, value in state.items():
            setattr(self, key, value)

    def to_json(self) -> str:
        """The state as indented JSON (non-finite floats become null)."""

        def finite(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, dict):
                return {k: finite(v) for k, v in x.items()}
            if isinstance(x, list):
                return [finite(v) for v in x]
            return x

        return json.dumps(finite(self.state_dict()), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainerState:
        state = cls()
        state.load_state_dict(json.loads(text))
        return state


@dataclass
class TrainerControl:
    """Actions requested by hooks, performed and cleared by the trainer.

    Attributes:
        should_stop: end training at the next stop synchronisation (every rank stops
            at the same step; may be set on one rank only).
        should_save: write a checkpoint after this step (all ranks alike).
        should_validate: run validation after this step (all ranks alike).
        should_log: compute and emit the training logs after this step (all ranks alike).
        should_rewind: at end of stream, replay the samples retained in the buffer as a
            new pseudo-epoch instead of stopping (all ranks alike).
    """

    should_stop: bool = False
    should_save: bool = False
    should_validate: bool = False
    should_log: bool = False
    should_rewind: bool = False

    def reset_step_flags(self) -> None:
        """Clear the per-step requests (not `should_stop`, which persists)."""
        self.should_save = False
        self.should_validate = False
        self.should_log = False
