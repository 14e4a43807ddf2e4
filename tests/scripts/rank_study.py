"""What the two-rank study scripts share (one_step_study.py, starved_rank.py; the
`recording_end` of empty_rank.py too): the study's trainer, and the record of how each
rank's `train()` ended. Imported from the script's own directory (its ``sys.path[0]``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from melissa_trainer import (
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

__all__ = ["recording_end", "study_trainer"]


def study_trainer(
    out: str,
    solver: str,
    parameters: list[dict[str, float]],
    job_limit: int,
    receiver: ReceiverConfig,
    process: Callable[[dict[str, Any]], tuple[torch.Tensor, torch.Tensor]],
    tuning: LauncherTuning | None = None,
    **arguments: Any,
) -> OnlineTrainer:
    """A trainer of ``Linear(1, 1)`` (seed 0, SGD at lr 1e-3) on a study of one
    simulation per entry of `parameters`, `job_limit` at a time, each this interpreter
    running the script `solver` on the local backend (no restart), streamed to a
    `StreamSource` of `receiver`; `TrainingArguments(output_dir=out, **arguments)`, with
    no progress bar and no report. `tuning` replaces the launcher's (default: a poll of
    0.05 s, no restart)."""
    launcher = Launcher(
        [sys.executable, solver],
        parameters,
        len(parameters),
        job_limit=job_limit,
        backend=LocalBackend(),
        tuning=tuning or LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    return OnlineTrainer(
        model,
        TrainingArguments(output_dir=out, disable_progress_bar=True, report_to="none", **arguments),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(receiver)),
        process_sample=process,
    )


@contextmanager
def recording_end(write: Callable[[str], None]) -> Iterator[None]:
    """Run the body, then `write` how it ended: ``"returned"``, or the class name of the
    exception it raised (which goes on, re-raised)."""
    ended = "returned"
    try:
        yield
    except BaseException as exc:
        ended = type(exc).__name__
        raise
    finally:
        write(ended)
