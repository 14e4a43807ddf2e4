"""The Navier–Stokes example's command line: its options (`FlowArgs`), its defaults
(`DEFAULTS`), what ``--help`` adds to the library's words (`NOTES`) and its `parser`,
whose refusals print a one-line usage before the error, as every study example's
(`study_args.ShortUsageParser`).

It imports no torch (numpy and the library's arguments only), so that train.py answers
``--help`` and refuses a bad flag before its heavy imports: torch's took 16-29 s on a
loaded machine, before the refusal's one line."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from study_args import ShortUsageParser, WorkerStudyArgs, buffer_defaults

from melissa_trainer.config.arguments import TrainingArguments
from navier_stokes.flow_config import FlowConfig, grid_size_ok
from navier_stokes.flow_config import cross_problems as solver_cross_problems
from navier_stokes.flow_config import range_problems as solver_range_problems

__all__ = [
    "COMPILE_NOTE",
    "DEFAULTS",
    "JSON_NOTE",
    "MODELS",
    "NOTES",
    "FlowArgs",
    "add_notes",
    "flow_problems",
    "memory_problems",
    "parser",
    "physical_memory",
]

#: the models ``--model`` selects (`models.make_model` builds them)
MODELS = ("fno", "unet", "neuralop")

#: what ``--help`` adds to the library's words on ``--torch_compile`` (a user trial: a
#: small CPU study trained 17 steps instead of 73, its stream over while it compiled).
#: No step count here: it follows the machine's speed and load (runs of that study:
#: compiled 17, 16 and 16 steps against eager 73, 66 and 33; a later trial reported 3
#: compiled steps): the how-to records the runs and their conditions
COMPILE_NOTE = (
    " On a CPU at this example's small sizes the first step's compilation (tens of "
    "seconds) can outlast the study: the simulations keep streaming while it compiles "
    "and training ends with the stream, so a compiled run trains fewer steps than an "
    "eager one, how many fewer following the machine's speed and load (runs recorded in "
    "docs/how-to/neural-operator.md). The end-of-run line's 'each sample trained on N "
    "times' shows it (against --sample_to_insert_ratio); stream more "
    "(--num_simulations, --time_steps) or leave compilation to a GPU."
)
#: what ``--help`` adds on ``--json`` (a user trial: a run stopped by Ctrl-C ended with
#: "preempted by SIGINT at step 80; checkpoint ..." and exit status 130, no summary;
#: a SIGTERM to accelerate launch, 143: test_example_navier_stokes_stop_codes.py)
JSON_NOTE = (
    ", when the run ends. A run stopped before its end (Ctrl-C, SIGTERM, its launcher's "
    "death) prints no summary: its log says 'preempted by SIGINT at step N; checkpoint "
    "...' and it exits non-zero (128 + the signal: 130 for Ctrl-C, 143 for SIGTERM; "
    "the same under accelerate launch, unless the signal reached a rank alone: 1). Read "
    "the last line only after an exit status of 0"
)
#: flag -> the words added to its help, before its "(default: ...)"
NOTES = {"torch_compile": COMPILE_NOTE, "json": JSON_NOTE}


def add_notes(parser: argparse.ArgumentParser) -> None:
    """Put each of `NOTES` in its flag's help, before the "(default: ...)" note."""
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        note = NOTES.get(action.dest)
        if note is not None and action.help not in (None, argparse.SUPPRESS):
            action.help = action.help.replace(" (default:", note + " (default:", 1)


@dataclass
class FlowArgs(WorkerStudyArgs):
    num_simulations: int = field(default=48, metadata={"help": "simulations in the study"})
    grid_size: int = field(default=64, metadata={"help": "grid points per side (256 on a GPU)"})
    time_steps: int = field(default=10, metadata={"help": "fields sent per simulation"})
    interval: float = field(default=0.5, metadata={"help": "time units between fields sent"})
    dt: float = field(
        default=0.025,
        metadata={
            "help": "solver time step, at most (each --interval in the fewest equal steps "
            "of at most --dt): the default stays stable and accurate up to 256^2 "
            "for this example's parameter ranges, so a finer grid needs no smaller one "
            "(a smaller one costs solver time: docs/how-to/neural-operator.md); a "
            "simulation whose solution blows up exits 3, which the launcher gives up at "
            "once (LauncherTuning.final_exit_codes: not restarted) and redraws"
        },
    )
    num_validation: int = field(default=4, metadata={"help": "held-out simulations"})
    model: str = field(default="fno", metadata={"help": "surrogate", "choices": MODELS})
    width: int = field(default=16, metadata={"help": "channels of the model's hidden layers"})
    modes: int = field(default=12, metadata={"help": "FNO: Fourier modes kept per direction"})
    layers: int = field(default=4, metadata={"help": "FNO: Fourier layers"})
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate"})
    plot: bool = field(default=True, metadata={"help": "write a PNG of prediction vs truth"})

    def range_problems(self) -> list[str]:
        problems = super().range_problems() + [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("num_validation", "width", "modes", "layers")
            if getattr(self, name) < 1
        ]
        if not self.learning_rate > 0:
            problems.append(f"learning_rate={self.learning_rate} must be > 0")
        # the solver's own rules, so that a bad value is a usage error, not a traceback
        return problems + solver_range_problems(
            self.grid_size, self.time_steps, self.interval, self.dt
        )

    def cross_problems(self) -> list[str]:
        problems = super().cross_problems() + solver_cross_problems(self.interval, self.dt)
        if not grid_size_ok(self.grid_size):  # (its own error says it: nothing to add)
            return problems
        if (
            self.model in ("fno", "neuralop")
            and self.modes >= 1
            and 2 * self.modes > self.grid_size
        ):
            # every way out, with values that pass: a user trial's --grid_size 16 was
            # told only "lower --modes", with no value, where a larger grid was wanted
            problems.append(
                f"modes={self.modes} needs grid_size >= {2 * self.modes}: raise "
                f"--grid_size to {2 * self.modes} or more, or lower --modes to "
                f"{self.grid_size // 2} or fewer"
            )
        if self.model == "unet" and self.grid_size % 4:
            problems.append(f"grid_size={self.grid_size} must be a multiple of 4 for the U-Net")
        return problems

    @property
    def config(self) -> FlowConfig:
        return FlowConfig(self.grid_size, self.time_steps, self.interval, self.dt)


#: what this example runs with unless told otherwise (shown by --help)
DEFAULTS: dict[str, Any] = {
    "output_dir": "outputs/navier_stokes",
    "buffer": "reservoir",
    "buffer_size": 480,
    "watermark": 64,
    "sample_to_insert_ratio": 16.0,
    "batch_size": 16,
    "logging_steps": 50,
    "eval_steps": 200,
}


def physical_memory() -> int | None:
    """This machine's memory in bytes; None where the system does not say (no check)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not POSIX, or the name unknown
        return None


def memory_problems(
    buffer_size: int, opts: FlowArgs, memory: int | None, ranks: int = 1
) -> list[str]:
    """The memory's problem, a line naming the flag and the fix, when the samples the
    run holds in host memory (each of `ranks` on this machine: its reservoir of
    `buffer_size` and the held-out set of num_validation x time_steps, each sample two
    float32 fields of grid_size^2) exceed `memory` bytes; nothing when `memory` is None
    or a value is out of its own range. A lower bound (the solvers, the model and the
    copies of a step are not counted): it catches a wrong grid, not a tight one.

    Why: ``--grid_size 1000000`` was a numpy ArrayMemoryError traceback from the
    held-out set's first field (exit status 1), and a grid just small enough to
    allocate ran for minutes before its reservoir outgrew the machine."""
    n = opts.grid_size
    if memory is None or not grid_size_ok(n) or buffer_size < 1 or ranks < 1:
        return []
    held_out = max(opts.num_validation, 0) * max(opts.time_steps, 0)
    sample = 2 * 4 * n * n  # vorticity and initial, float32
    needed = ranks * (buffer_size + held_out) * sample
    if needed <= memory:
        return []
    on = f" on each of {ranks} ranks" if ranks > 1 else ""
    # the fix names the larger count's flags (--time_steps 1000000 is not the grid's fault)
    flag, fix = (
        ("grid_size", "lower --grid_size or --buffer_size")
        if buffer_size >= held_out
        else ("time_steps", "lower --time_steps, --num_validation or --grid_size")
    )
    return [
        f"argument --{flag}: grid_size={n} makes each sample (two float32 fields of "
        f"{n}^2) {_size(sample)}, and this run holds {buffer_size + held_out} of them"
        f"{on} (buffer_size={buffer_size} and the held-out set's {held_out}: "
        f"num_validation={opts.num_validation} x time_steps={opts.time_steps}): "
        f"{_size(needed)}, more than this machine's {_size(memory)} of memory; {fix}"
    ]


def _size(count: int) -> str:
    """`count` bytes in the largest unit of at most 1,000 (KB, MB, GB, TB, PB)."""
    value = float(count)
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if value < 1000:
            return f"{value:.3g} {unit}"
        value /= 1000
    return f"{value:.3g} PB"


def flow_problems(outputs: Sequence[Any]) -> list[str]:
    """`memory_problems` of the parsed options `outputs` (TrainingArguments, FlowArgs),
    on this machine's memory and its ranks (accelerate launch says how many share it)."""
    training = next(o for o in outputs if isinstance(o, TrainingArguments))
    flow = next(o for o in outputs if isinstance(o, FlowArgs))
    ranks = os.environ.get("LOCAL_WORLD_SIZE", "1")
    count = int(ranks) if ranks.isdigit() else 1
    return memory_problems(training.buffer_size, flow, physical_memory(), count)


def parser(argv: Sequence[str] | None = None) -> ShortUsageParser:
    """The command line `argv`: TrainingArguments and FlowArgs, with this example's
    defaults (the reservoir's rate limit only with ``--buffer reservoir``), `cli.NOTES`
    in the help of ``--torch_compile`` and ``--json``, a one-line usage before an error
    (`ShortUsageParser`, as every study example's), and a grid whose samples exceed
    this machine's memory refused (`flow_problems`)."""
    made = ShortUsageParser(
        TrainingArguments,
        FlowArgs,
        defaults=buffer_defaults(DEFAULTS, argv),
        problems=flow_problems,
    )
    add_notes(made)
    return made
