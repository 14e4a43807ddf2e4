"""A failed save's advice follows its error (htrial28 finding 3): before, a read-only
checkpoint folder (``[Errno 30] Read-only file system``) was told to "make room", and
that "the partial checkpoint was removed" though none had been made. Now: ENOSPC and
EDQUOT ask for room; EROFS, EACCES, EPERM for a writable folder or another
output_dir; other errors are left in the OS's words; "removed" only when a partial
checkpoint was made and removed.

The errors are raised where the save meets them: making the staging directory
(`paths.begin`: nothing made yet), or writing a rank's files (`registry.write`: the
staging directory exists).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint import paths, registry
from melissa_trainer.checkpoint.errors import CheckpointSaveError


def _trainer(out: Path) -> OnlineTrainer:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    model = small_model()
    args = TrainingArguments(
        output_dir=str(out), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, logging_steps=1000, report_to="none", disable_progress_bar=True,
        save_steps=3, save_seconds=None, save_at_end=False,
    )  # fmt: skip
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(400)),
        process_sample=xy,
    )


def _failing(code: int) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code), "/somewhere/checkpoints")

    return fail


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("where", "code", "says", "not_said", "removed"),
    [
        ("begin", errno.EROFS, "writable", "make room", False),
        ("begin", errno.EACCES, "writable", "make room", False),
        ("write", errno.EROFS, "writable", "make room", True),
        ("write", errno.ENOSPC, "make room", "writable", True),
        ("write", errno.EDQUOT, "make room", "writable", True),
        ("write", errno.EIO, "once the cause the error names is fixed", "make room", True),
    ],
)
def test_the_advice_follows_the_error_and_removed_is_said_only_when_true(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    code: int,
    says: str,
    not_said: str,
    removed: bool,
) -> None:
    if where == "begin":
        monkeypatch.setattr(paths, "begin", _failing(code))
    else:
        monkeypatch.setattr(registry, "write", _failing(code))
    trainer = _trainer(tmp_path / "out")
    with pytest.raises(CheckpointSaveError) as info:
        trainer.train()
    message = str(info.value)
    assert os.strerror(code) in message, message  # the OS's words
    assert says in message, message
    assert not_said not in message, message
    assert ("partial checkpoint was removed" in message) is removed, message
    assert not list((tmp_path / "out" / "checkpoints").glob("*staging*"))
