"""The heat example's command line: its options (`HeatArgs`), its defaults
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

from heat_pde.solver import HeatConfig, config_problems
from melissa_trainer.config.arguments import TrainingArguments

__all__ = ["DEFAULTS", "HeatArgs", "parser"]


@dataclass
class HeatArgs(WorkerStudyArgs):
    sampler: str = field(
        default="lhs",
        metadata={"help": "parameter sampler; breed: adaptive, 30% of the draws bred from "
                  "the simulations trained worst (exploration 0.7; no gain measured on "
                  "held-out seeds, see docs/measured.md), the others gap-filling Sobol'; "
                  "density: adaptive, the optimised Latin hypercube of the study bent "
                  "towards the parameters trained worst (the guide's choice for 6 "
                  "parameters and more: docs/concepts/study.md; this example's loss "
                  "bends none of its draws at the defaults, its account says so: "
                  "docs/measured.md); surrogate: adaptive, the surrogate acquisition "
                  "(the guide's choice for the worst cases at 2-3 parameters; this "
                  "example has 5)",
                  "choices": ("lhs", "uniform", "halton", "sobol", "breed", "density",
                              "surrogate")},
    )  # fmt: skip
    grid_size: int = field(default=32, metadata={"help": "interior grid points per side"})
    time_steps: int = field(default=100, metadata={"help": "time steps per simulation"})
    dt: float = field(default=1e-3, metadata={"help": "time step (implicit: any dt is stable)"})
    num_validation: int = field(
        default=32,
        metadata={"help": "held-out simulations, the same set whatever --seed: a quarter "
                  "at corners of the parameter box, the rest spread over it (the worst "
                  "case is the largest of their errors: with 4 it means little; each "
                  "costs a solve and its share of each validation, a fraction of a "
                  "second in all at the defaults)"},
    )  # fmt: skip
    hidden: int = field(default=256, metadata={"help": "MLP width"})
    learning_rate: float = field(default=1e-3, metadata={"help": "Adam learning rate"})
    plot: bool = field(default=True, metadata={"help": "write a PNG of prediction vs truth"})

    def range_problems(self) -> list[str]:
        problems = super().range_problems() + [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("num_validation", "hidden")
            if getattr(self, name) < 1
        ]
        if not self.learning_rate > 0:
            problems.append(f"learning_rate={self.learning_rate} must be > 0")
        # the solver's own rules, so that a bad value is a usage error naming its flag,
        # not a traceback
        return problems + config_problems(self.grid_size, self.time_steps, self.dt)

    @property
    def config(self) -> HeatConfig:
        return HeatConfig(self.grid_size, self.time_steps, self.dt)


#: what this example runs with unless told otherwise (shown by --help)
DEFAULTS: dict[str, Any] = {
    "output_dir": "outputs/heat_pde",
    "buffer": "reservoir",
    "buffer_size": 4000,
    "watermark": 500,
    "sample_to_insert_ratio": 8.0,
    "batch_size": 32,
    "logging_steps": 200,
    "eval_steps": 500,
}


def parser(argv: Sequence[str] | None = None) -> ShortUsageParser:
    """The command line `argv` (`ShortUsageParser`): TrainingArguments and HeatArgs,
    with this example's defaults (the reservoir's rate limit only with ``--buffer reservoir``)."""
    return ShortUsageParser(TrainingArguments, HeatArgs, defaults=buffer_defaults(DEFAULTS, argv))
