"""A trainer that fails with an error that is not a `SourceError` (a hook raising, the
user's `process_sample`, the loss guard's `NonFiniteLossError`) tells its source why
(`Source.note_stop("error", ...)`): its receivers' stop record (docs/protocol.md,
section 17b) then says ``error`` and names the exception, so that a simulation closing
as it fails does not wait as for a trainer that might come back. Before, the record
said ``stopped``. The oracle is the rendezvous file the receiver wrote, read as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, TrainingArguments
from melissa_trainer.hooks import Hook


class Boom(RuntimeError):
    """The hook's own error (a name the record must carry)."""


class FailingHook(Hook):
    def on_train_start(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("the hook's own failure")


@pytest.mark.timeout(120)
def test_a_hook_that_raises_records_error_naming_the_exception(tmp_path: Path) -> None:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",
            buffer_size=8,
            disable_progress_bar=True,
            report_to="none",
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=StreamSource(ReceiverConfig(rendezvous_dir=str(tmp_path / "rendezvous"))),
        process_sample=Keys(),
        hooks=[FailingHook()],
    )
    with pytest.raises(Boom):
        trainer.train()
    entry = json.loads((tmp_path / "rendezvous" / "rank_0.json").read_text())
    assert entry["stopped"] is True
    reason = entry["stop_record"]["reason"]
    assert reason["code"] == "error", reason  # (before: "stopped")
    assert "Boom" in reason["message"] and "the hook's own failure" in reason["message"]
    assert "\n" not in reason["message"]
