"""The heat_guess example's command line: its `parser` (its own flags only: the
example fixes its `TrainingArguments`) and `parse`, which refuses a bad value as a
usage error naming it (exit status 2) and returns the solver's `GuessConfig`.

It imports no torch (numpy only, through `heat_guess.solver`), so that train.py answers
``--help`` and refuses a bad flag before its heavy imports: torch's took 16-29 s on a
loaded machine, before the refusal's one line."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from heat_guess.solver import GUESS_CHECKS, METHODS, GuessConfig

__all__ = ["check_kernel", "parse", "parser", "rerun_words"]

#: what ``--help`` says after the flags
EPILOG = (
    "The training itself is fixed by the example (run_study's TrainingArguments: "
    "a reservoir buffer, batches of 16, Adam at 3e-3): it takes only the flags above, "
    "not the TrainingArguments flags of the heat_pde and lorenz examples."
)


def check_kernel(kernel: int) -> None:
    """ValueError unless `kernel`, the surrogate's convolution width (`train.OddConv`),
    is odd and >= 3 (its odd padding needs a centre and a point either side)."""
    if kernel < 3 or kernel % 2 == 0:
        raise ValueError(f"kernel must be odd and >= 3, not {kernel}")


def rerun_words(output_dir: str, checkpoints: Sequence[str], root: str) -> str:
    """Why a run without ``--resume_from_checkpoint`` is refused in `output_dir` (the
    folder the user gave: the trainer's is its ``run``, which the library's own refusal
    named, ``output_dir='out/run'``, a folder the user never typed), which holds the
    earlier run's `checkpoints` (their names) in `root`, and the example's flags that
    go on."""
    return (
        f"--output_dir {output_dir} holds checkpoints of an earlier run "
        f"({', '.join(checkpoints)}, in {root}) and --resume_from_checkpoint is not given: "
        f"continue that run with --resume_from_checkpoint latest, start afresh in another "
        f"--output_dir, or add --overwrite_output_dir to move them to "
        f"{os.path.basename(root)}-previous-TIME beside them (nothing is deleted)"
    )


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The command line, described by `doc`'s first paragraph (train.py's docstring),
    whole: its first line stopped mid-sentence."""
    made = argparse.ArgumentParser(
        description=" ".join((doc or "").split("\n\n")[0].split()).replace("`", ""),
        epilog=EPILOG,
    )
    d = GuessConfig()
    made.add_argument("--num_simulations", type=int, default=6)
    made.add_argument("--job_limit", type=int, default=2)
    made.add_argument("--grid_size", type=int, default=d.grid_size)
    made.add_argument("--time_steps", type=int, default=d.time_steps)
    made.add_argument("--dt", type=float, default=d.dt)
    made.add_argument("--tol", type=float, default=d.tol)
    made.add_argument("--method", choices=METHODS, default=d.method)
    made.add_argument("--guess_check", choices=GUESS_CHECKS, default=d.guess_check, help=(
        "residual: a simulation takes a guess only if its residual is the smaller (one more "
        "product by A); none: every guess that comes, however bad"))  # fmt: skip
    made.add_argument("--kernel", type=int, default=11, help="the convolution's width (odd)")
    made.add_argument("--no_surrogate", action="store_true", help="the simulations never ask")
    made.add_argument("--seed", type=int, default=0)
    made.add_argument("--output_dir", default=None, help=(
        "default: a temporary directory; on several ranks outputs/heat_guess (the ranks' "
        "temporary directories would differ)"))  # fmt: skip
    made.add_argument("--resume_from_checkpoint", default=None, help=(
        "continue a run stopped by SIGTERM or Ctrl-C (its checkpoint) in the same "
        "--output_dir: 'latest', or a checkpoint's path"))  # fmt: skip
    made.add_argument("--overwrite_output_dir", action="store_true", help=(
        "start afresh in an --output_dir that holds an earlier run's checkpoints (a "
        "stopped run's, a finished one's end: moved aside to checkpoints-previous-TIME, "
        "nothing deleted; its records replaced)"))  # fmt: skip
    made.add_argument("--json", action="store_true", help="last line: a JSON summary")
    return made


def parse(argv: Sequence[str] | None, doc: str | None) -> tuple[argparse.Namespace, GuessConfig]:
    """`argv` (None: ``sys.argv[1:]``) parsed by `parser(doc)` and checked: the options
    and the solver's configuration; a bad value exits with status 2, naming it."""
    made = parser(doc)
    opts = made.parse_args(argv)
    try:
        config = GuessConfig(
            opts.grid_size, opts.time_steps, opts.dt, opts.tol, opts.method, opts.guess_check
        )
        for name in ("num_simulations", "job_limit"):
            if getattr(opts, name) < 1:
                raise ValueError(f"--{name} must be >= 1, not {getattr(opts, name)}")
        check_kernel(opts.kernel)
        one_process = os.environ.get("WORLD_SIZE", "1") == "1"  # (else outputs/heat_guess)
        if opts.resume_from_checkpoint and opts.output_dir is None and one_process:
            raise ValueError(
                "--resume_from_checkpoint needs the --output_dir of the run it continues "
                "(without one, each run has its own temporary directory)"
            )
    except ValueError as exc:
        made.error(str(exc))
    return opts, config
