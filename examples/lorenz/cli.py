"""The Lorenz example's command line: its options (`LorenzArgs`), its defaults
(`DEFAULTS`) and its `parser`, whose refusals print a one-line usage before the error
naming the flag, as every study example's (`study_args.ShortUsageParser`).

It imports no torch (numpy and the library's arguments only), so that train.py answers
``--help`` and refuses a bad flag before its heavy imports: torch's took 16-29 s on a
loaded machine, before the refusal's one line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from study_args import ShortUsageParser, WorkerStudyArgs, buffer_defaults

from melissa_trainer.config.arguments import TrainingArguments

__all__ = ["DEFAULTS", "LorenzArgs", "parser"]


@dataclass
class LorenzArgs(WorkerStudyArgs):
    time_steps: int = field(default=1000, metadata={"help": "transitions per simulation"})
    dt: float = field(default=0.01, metadata={"help": "RK4 time step"})
    num_validation: int = field(default=8, metadata={"help": "held-out trajectories"})
    horizon: int = field(default=50, metadata={"help": "rollout steps of the validation"})
    hidden: int = field(default=128, metadata={"help": "MLP width"})
    learning_rate: float = field(default=2e-3, metadata={"help": "Adam learning rate"})
    plot: bool = field(default=True, metadata={"help": "write a PNG of rollouts vs truth"})

    def range_problems(self) -> list[str]:
        problems = super().range_problems() + [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("time_steps", "num_validation", "horizon", "hidden")
            if getattr(self, name) < 1
        ]
        for name in ("dt", "learning_rate"):
            if not getattr(self, name) > 0:
                problems.append(f"{name}={getattr(self, name)} must be > 0")
        return problems

    def cross_problems(self) -> list[str]:
        problems = super().cross_problems()
        # (against time_steps out of its range, a bound on horizon means nothing)
        if 1 <= self.time_steps < self.horizon:
            problems.append(f"horizon={self.horizon} must be <= time_steps={self.time_steps}")
        return problems


#: what this example runs with unless told otherwise (shown by --help)
DEFAULTS: dict[str, Any] = {
    "output_dir": "outputs/lorenz",
    "buffer": "reservoir",
    "buffer_size": 20_000,
    "watermark": 2000,
    "sample_to_insert_ratio": 4.0,
    "batch_size": 128,
    "logging_steps": 200,
    "eval_steps": 500,
}


def parser(argv: Sequence[str] | None = None) -> ShortUsageParser:
    """The command line `argv`: TrainingArguments and LorenzArgs, with this example's
    defaults (the reservoir's rate limit only with ``--buffer reservoir``), a refusal
    one line of usage and the error naming the flag (`ShortUsageParser`)."""
    return ShortUsageParser(TrainingArguments, LorenzArgs, defaults=buffer_defaults(DEFAULTS, argv))
