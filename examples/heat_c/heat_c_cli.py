"""The C heat example's command line: its options (`HeatCArgs`), its defaults
(`DEFAULTS`) and its `parser`, whose refusals print a one-line usage before the error
naming the flag, as every study example's (`study_args.ShortUsageParser`). Its name is
not a bare ``cli``: train.py puts this folder first on `sys.path`.

It imports no torch (numpy and the library's arguments only), so that train.py answers
``--help`` and refuses a bad flag before its heavy imports: torch's took 16-29 s on a
loaded machine, before the refusal's one line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference import DEFAULT_R
from study_args import ShortUsageParser, StudyArgs, buffer_defaults

from melissa_trainer.config.arguments import TrainingArguments

__all__ = ["DEFAULTS", "SOLVERS", "HeatCArgs", "parser"]

HERE = Path(__file__).resolve().parent
SOLVERS = {"c": "heat_c", "fortran": "heat_fortran"}


@dataclass
class HeatCArgs(StudyArgs):
    solver: str = field(
        default="c", metadata={"help": "which solver runs", "choices": tuple(SOLVERS)}
    )
    build_dir: str = field(
        default=str(HERE / "build"), metadata={"help": "where CMake built the solvers"}
    )
    mpiexec: str = field(
        default="mpiexec",
        metadata={"help": "the MPI launcher (a name on PATH or a path) of the mpiexec backend"},
    )
    ranks: int = field(default=2, metadata={"help": "MPI ranks per simulation"})
    nx: int = field(default=16, metadata={"help": "interior grid points along x"})
    ny: int = field(default=16, metadata={"help": "interior grid points along y"})
    time_steps: int = field(default=80, metadata={"help": "explicit steps per simulation"})
    r: float = field(default=DEFAULT_R, metadata={"help": "alpha dt / h^2, in (0, 1/4]"})
    num_validation: int = field(default=4, metadata={"help": "held-out simulations"})
    hidden: int = field(default=256, metadata={"help": "MLP width"})
    learning_rate: float = field(default=1e-3, metadata={"help": "Adam learning rate"})

    def range_problems(self) -> list[str]:
        problems = super().range_problems() + [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("ranks", "nx", "ny", "time_steps", "num_validation", "hidden")
            if getattr(self, name) < 1
        ]
        if not 0 < self.r <= 0.25:
            problems.append(f"r={self.r} must be in (0, 0.25] (stability)")
        return problems

    def cross_problems(self) -> list[str]:
        problems = super().cross_problems()
        # (each rank holds rows of y; with either out of its range this means nothing)
        if 1 <= self.ny < self.ranks:
            problems.append(f"ny={self.ny} must be >= ranks={self.ranks}")
        return problems

    def command(self) -> list[str]:
        """The solver's argv; SystemExit naming the fix if it was not built."""
        binary = Path(self.build_dir) / SOLVERS[self.solver]
        if not binary.is_file():
            sys.exit(
                f"{binary} not found: build the examples first (cmake -S {HERE} -B "
                f"{self.build_dir} -DCMAKE_PREFIX_PATH=<the client's install prefix> && "
                f"cmake --build {self.build_dir}), or pass --build_dir"
            )
        return [str(binary), str(self.nx), str(self.ny), str(self.time_steps), repr(self.r)]


DEFAULTS: dict[str, Any] = {
    "output_dir": "outputs/heat_c",
    "buffer": "reservoir",
    "buffer_size": 4000,
    "watermark": 400,
    "sample_to_insert_ratio": 8.0,
    "batch_size": 32,
    "logging_steps": 200,
    "eval_steps": 500,
    "backend": "mpiexec",
    "num_simulations": 32,
}


def parser(argv: Sequence[str] | None = None) -> ShortUsageParser:
    """The command line `argv`: TrainingArguments and HeatCArgs, with this example's
    defaults (the reservoir's rate limit only with ``--buffer reservoir``), a refusal
    one line of usage and the error naming the flag (`ShortUsageParser`)."""
    return ShortUsageParser(TrainingArguments, HeatCArgs, defaults=buffer_defaults(DEFAULTS, argv))
