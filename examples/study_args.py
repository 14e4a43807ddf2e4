"""The study examples' command line, light enough to answer before torch's import: the
study's options (`StudyArgs`; `WorkerStudyArgs` with ``--worker``), the parser of an
example's command line (`ShortUsageParser`: a refusal is one line of usage and the error
naming the flag) and an example's defaults for its buffer (`buffer_defaults`).

It imports the library's `TrainingArguments`, `ArgumentParser` and `LauncherTuning`,
never torch, accelerate or pyzmq, so that an example's ``--help`` and a refused flag
answer at once (importing torch took 16-29 s on a loaded machine): each example's own
command-line module builds on it, and its train.py parses ``sys.argv`` with it before
its heavy imports. `study_common` re-exports every name here.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from melissa_trainer.config.parser import ArgumentParser
from melissa_trainer.config.reading import ConfigError, load_config_file
from melissa_trainer.launcher.silence import Default
from melissa_trainer.launcher.tuning import LauncherTuning

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = [
    "ADAPTIVE_SAMPLERS",
    "RESERVOIR_ONLY",
    "ShortUsageParser",
    "StudyArgs",
    "WorkerStudyArgs",
    "buffer_defaults",
    "training_problems",
]


@dataclass
class StudyArgs:
    """The study's options; an example's own dataclass extends them."""

    num_simulations: int = field(default=64, metadata={"help": "simulations in the study"})
    job_limit: int = field(default=2, metadata={"help": "simulations running at once"})
    backend: str = field(
        default="local",
        metadata={"help": "where simulations run", "choices": ("local", "mpiexec", "slurm")},
    )
    sampler: str = field(
        default="lhs",
        metadata={"help": "parameter sampler", "choices": ("lhs", "uniform", "halton", "sobol")},
    )
    simulation_timeout: float | None = field(
        default=None,
        metadata={
            "help": "seconds of a solver's silence before it is killed and restarted "
            "(default: derived from the study, LauncherTuning's 'auto')"
        },
    )
    silence_floor: float = field(
        default=LauncherTuning.silence_floor,
        metadata={"help": "with the derived timeout: seconds a solver that has sent a message "
                  "may stay silent before it is killed as hung (at least; 10 x the longest "
                  "silence between two messages seen, if more). Raise it for solvers whose "
                  "steps take longer"},
    )  # fmt: skip
    startup_timeout: float | None = field(
        default=None,
        metadata={"help": "seconds a solver may take to send its first message (imports, "
                  "set-up, first step) before it is killed as hung (the stream waits at "
                  "least as long for a first message); default 600 with the derived "
                  "timeout, --simulation_timeout's when that is given"},
    )  # fmt: skip
    bind: str | None = field(
        default=None,
        metadata={"help": "receiver endpoint (default: loopback, tcp://127.0.0.1:*; with "
                  "--backend slurm, whose jobs run on compute nodes, every interface, "
                  "tcp://*:*, published under this host's name: keep it behind a "
                  "firewall; tcp://ADDRESS:* publishes ADDRESS, for nodes that do not "
                  "resolve the name, or resolve it to loopback)"},
    )  # fmt: skip
    external: bool = field(
        default=False,
        metadata={"help": "launch nothing: wait for NUM_SIMULATIONS solvers started by hand"},
    )
    nonfinite: str = field(
        default="refuse",
        metadata={"help": "samples holding NaN or Inf: refuse (drop and count), accept "
                  "(train on them), fail (fail their simulation)",
                  "choices": ("refuse", "accept", "fail")},
    )  # fmt: skip
    json: bool = field(default=False, metadata={"help": "print a JSON summary as the last line"})

    seeds: int = field(
        default=1,
        metadata={"help": "run the whole study this many times, with seeds SEED, SEED+1, ... "
                  "(each in OUTPUT_DIR/seed-S, one after the other), and report the spread "
                  "of the validation error: what one run's figure is worth"},
    )  # fmt: skip

    def receiver_bind(self) -> str:
        """The receivers' endpoint: --bind, else every interface with --backend slurm
        (its jobs run on compute nodes, which cannot reach this host's loopback: the
        simulations would find no receiver, each attempt giving up after the client's
        60 s), else loopback. Imports the stream package (zmq): called once the flags are
        taken, never before a refusal or --help's answer."""
        from melissa_trainer.stream.receiver_config import DEFAULT_BIND

        if self.bind is not None:
            return self.bind
        return "tcp://*:*" if self.backend == "slurm" else DEFAULT_BIND

    def problems(self) -> list[str]:
        """What is wrong with these values, one line each: every option's own range first
        (`range_problems`), then what must hold between options (`cross_problems`). A
        subclass extends those two, not this: a user trial's ``--grid_size -8`` led with
        "modes=12 needs grid_size >= 24", a check against a grid that cannot exist,
        before the grid size's own error."""
        return self.range_problems() + self.cross_problems()

    def range_problems(self) -> list[str]:
        """Each option's own range (a subclass adds its options')."""
        return [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("num_simulations", "job_limit", "seeds")
            if getattr(self, name) < 1
        ] + [
            f"{name}={getattr(self, name)} must be > 0 (seconds)"
            for name in ("silence_floor", "startup_timeout")
            if getattr(self, name) is not None and not getattr(self, name) > 0
        ]

    def cross_problems(self) -> list[str]:
        """What must hold between options (a subclass adds its own), each left out where
        it means nothing: a bound derived from a value out of its own range (the grid
        size that 12 modes need, against a grid of -8 points) says nothing that the
        range's error does not, and misleads (it names the other option's fix)."""
        problems = []
        # (unset, silence_floor is LauncherTuning's own default, a `Default`)
        if self.simulation_timeout and not isinstance(self.silence_floor, Default):
            problems.append(
                f"silence_floor={self.silence_floor} changes nothing with simulation_timeout="
                f"{self.simulation_timeout}: it shapes only the derived timeout; drop "
                f"--silence_floor, or drop --simulation_timeout to derive the timeout"
            )
        return problems

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:  # one line each, which `ShortUsageParser` prefixes with its flag
            raise ConfigError(problems)


@dataclass
class WorkerStudyArgs(StudyArgs):
    """The study's options and ``--worker``, for an example whose solver has a worker
    mode of its own (its ``--worker``, `melissa_trainer.client.worker.serve_simulations`)."""

    worker: bool = field(default=False, metadata={"help": "worker mode: job_limit solvers "
                         "pay the start-up once each, run simulations in turn"})  # fmt: skip

    def cross_problems(self) -> list[str]:
        problems = super().cross_problems()
        if self.worker and self.external:  # (workers ask the launcher, which --external lacks)
            problems.append("--worker runs the launcher's workers: not with --external")
        return problems


#: `make_sampler`'s adaptive kinds, steered by the per-simulation losses (the library's
#: `launcher.samplers`; named here so that a refusal needs no import of the launcher)
ADAPTIVE_SAMPLERS = ("breed", "density", "surrogate")


def training_problems(outputs: Sequence[Any]) -> list[str]:
    """What must hold between the study's options and the training's (the parser's
    dataclasses `outputs`), one line each: an adaptive ``--sampler`` with
    ``--simulation_loss_steps 0`` (the losses that steer it turned off) was a traceback
    from the trainer's construction, after the whole command line had been taken
    (htrial49), where every other bad flag is a usage error."""
    values = {name: getattr(o, name) for o in outputs for name in
              ("sampler", "simulation_loss_steps") if hasattr(o, name)}  # fmt: skip
    sampler = values.get("sampler")
    if sampler in ADAPTIVE_SAMPLERS and values.get("simulation_loss_steps") == 0:
        return [
            f"argument --simulation_loss_steps: 0 turns the per-simulation losses off, but "
            f"--sampler {sampler} is adaptive and steered by them: drop "
            f"--simulation_loss_steps (the default), set it > 0, or use a fixed design "
            f"(--sampler lhs)"
        ]
    return []


class ShortUsageParser(ArgumentParser):
    """The examples' parser: the library's `ArgumentParser` (its errors name the flag:
    ``argument --num_simulations: num_simulations=0 must be >= 1``), whose refusals print
    one line of usage before that error, not the ~45 lines of every flag (``--help``
    still lists them); it also refuses what conflicts between the study's options and
    the training's (`training_problems`)."""

    def __init__(
        self,
        *dataclass_types: Any,
        problems: Callable[[Sequence[Any]], list[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        """The library's parser of `dataclass_types`; `problems`: an example's own checks
        between its dataclasses (the parsed outputs -> one line each, naming the flag),
        refused after `training_problems` (the Navier-Stokes example's memory check)."""
        super().__init__(*dataclass_types, **kwargs)
        self.problems = problems

    def parse_args_into_dataclasses(
        self, args: Sequence[str] | None = None, return_remaining_strings: bool = False
    ) -> tuple[Any, ...]:
        """The library's parse, then `training_problems` and the example's `problems`:
        a usage error (status 2)."""
        outputs = super().parse_args_into_dataclasses(args, return_remaining_strings)
        problems = training_problems(outputs)
        if self.problems is not None:
            problems += self.problems(outputs)
        if problems:
            self.error("; ".join(problems))
        return outputs

    def print_usage(self, file: SupportsWrite[str] | None = None) -> None:
        # (argparse's error() prints the usage, then "PROG: error: MESSAGE", exit 2)
        self._print_message(
            f"usage: {self.prog} [-h] [--FLAG VALUE ...] (--help lists them)\n", file
        )


#: TrainingArguments fields that only a reservoir buffer takes (FIFO and FIRO refuse them)
RESERVOIR_ONLY = ("max_sample_reuse", "sample_to_insert_ratio", "sample_to_insert_tolerance")


def buffer_defaults(defaults: Mapping[str, Any], argv: Sequence[str] | None) -> dict[str, Any]:
    """An example's `defaults` for the buffer its command line chooses (``--buffer``,
    else its ``--config`` file's, else the default's): with a FIFO or FIRO, the
    example's reservoir-only defaults (its rate limit, `sample_to_insert_ratio`) are
    left out, since those buffers refuse them; given explicitly they are still refused,
    by an error that names the fix. `argv` None: ``sys.argv[1:]``."""
    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    peek.add_argument("--buffer")
    peek.add_argument("--config")
    known, _ = peek.parse_known_args(argv)
    buffer = known.buffer
    if buffer is None and known.config:
        # a bad file: the example's own parse reports it
        with contextlib.suppress(ConfigError):
            buffer = load_config_file(known.config).get("buffer")
    buffer = str(buffer if buffer is not None else defaults.get("buffer", "reservoir"))
    if buffer.strip().lower() == "reservoir":
        return dict(defaults)
    return {k: v for k, v in defaults.items() if k not in RESERVOIR_ONLY}
