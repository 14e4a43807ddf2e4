"""TensorBoard after a resume: the points the stopped run wrote after its last
checkpoint are computed again by the resumed run; TensorBoard's readers show each step
once (the resumed run's), not twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)
accumulators = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
plugin = pytest.importorskip("tensorboard.backend.event_processing.plugin_event_accumulator")


def run(out: Path, **over: Any) -> None:
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="reservoir",
        buffer_size=64,
        watermark=8,
        logging_steps=4,
        save_steps=8,
        save_at_end=False,  # the stopped run: its last checkpoint is before its last logs
        report_to="tensorboard",
        disable_progress_bar=True,
        **over,
    )
    model = small_model(0)
    OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(400, 0)),
        process_sample=xy,
    ).train()


def steps_read_back(logdir: Path) -> tuple[list[int], list[int]]:
    """train/loss's steps as the two readers TensorBoard has give them."""
    legacy = accumulators.EventAccumulator(str(logdir))
    legacy.Reload()
    current = plugin.EventAccumulator(str(logdir))
    current.Reload()
    return (
        [e.step for e in legacy.Scalars("train/loss")],
        [e.step for e in current.Tensors("train/loss")],
    )


def order_files(logdir: Path, run: int) -> None:
    """Name the event file that run number `run` wrote so that it sorts after the earlier
    runs' files. TensorBoard reads a folder's files by name: a timestamp in seconds, the
    host, the pid, a per-process counter. A real resume starts seconds after the stopped
    run began; these runs share a second and a process, and the counter sorts as text
    ("10" before "9")."""
    (new,) = [f for f in logdir.iterdir() if ".test." not in f.name]
    new.rename(logdir / f"events.out.tfevents.{1_000_000_000 + run:010d}.test.{run}")


def test_a_resumed_run_leaves_one_point_per_step(tmp_path: Path) -> None:
    out, logs = tmp_path / "out", tmp_path / "out" / "runs"
    run(out, max_steps=20)  # logs at 4 ... 20, checkpoints at 8 and 16: "killed" at 20
    order_files(logs, 0)
    assert steps_read_back(logs) == ([4, 8, 12, 16, 20],) * 2
    run(out, max_steps=28, resume_from_checkpoint="latest")  # from 16: 20 again, 24, 28
    order_files(logs, 1)
    # each step once (20: the resumed run's), in order, by both readers
    assert steps_read_back(logs) == ([4, 8, 12, 16, 20, 24, 28],) * 2
    run(out, max_steps=36, resume_from_checkpoint="latest")  # from 24 (28: no save): a
    order_files(logs, 2)  # second restart, 28 again
    assert steps_read_back(logs) == ([4, 8, 12, 16, 20, 24, 28, 32, 36],) * 2
