"""The one-process trainer whose stop record the stop-record tests read, and the reading
(tests/trainer/test_failure_stop_record.py, test_forced_stop_cause.py,
test_restarts_left_needs_resume.py, tests/study/test_study_stop_reason.py): a receiver's
stop record (docs/protocol.md, section 2, "The stop record") is the oracle, read as JSON
from the rendezvous file it wrote."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, Source, StreamSource, TrainingArguments
from melissa_trainer.hooks import Hook

__all__ = ["failing_trainer", "record_trainer", "recorded_reason", "stop_reason"]


def record_trainer(
    tmp_path: Path, source: Source, hooks: Iterable[Hook] = (), **overrides: Any
) -> OnlineTrainer:
    """A trainer of ``Linear(3, 1)`` (seed 0, SGD) on `source`, in ``tmp_path/"out"``:
    batches of 1 from a FIFO of 8, samples' keys recorded (`Keys`), with `hooks` and the
    `overrides` of its `TrainingArguments`. Accelerate's state is reset first: a test
    before, in this process, may have left its own."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    settings: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "batch_size": 1,
        "buffer": "fifo",
        "buffer_size": 8,
        "disable_progress_bar": True,
        "report_to": "none",
        **overrides,
    }
    return OnlineTrainer(
        model,
        TrainingArguments(**settings),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=source,
        process_sample=Keys(),
        hooks=list(hooks),
    )


def failing_trainer(tmp_path: Path, hook: Hook, **overrides: Any) -> OnlineTrainer:
    """`record_trainer` with `hook` (which fails, or not) on a stream whose receivers
    write their rendezvous file, and their stop record, in ``tmp_path/"rendezvous"``."""
    rendezvous = str(tmp_path / "rendezvous")
    return record_trainer(
        tmp_path, StreamSource(ReceiverConfig(rendezvous_dir=rendezvous)), [hook], **overrides
    )


def stop_reason(rendezvous: Path) -> dict[str, Any]:
    """The reason of rank 0's stop record in the rendezvous folder `rendezvous`, which
    must say its receivers stopped."""
    entry = json.loads((rendezvous / "rank_0.json").read_text())
    assert entry["stopped"] is True
    reason: dict[str, Any] = entry["stop_record"]["reason"]
    return reason


def recorded_reason(tmp_path: Path) -> dict[str, Any]:
    """`stop_reason` of a `failing_trainer`'s stream."""
    return stop_reason(tmp_path / "rendezvous")
