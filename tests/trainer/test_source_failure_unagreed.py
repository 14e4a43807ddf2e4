"""`SourceFailure.unagreed` for a held lr_scheduler failure (`hold_schedule`) whose
agreement broke as another rank died: one account, the `ScheduleEnded` this rank raises,
the other rank's end in a note of it; no ERROR line of the peer's own (before: rank 1's
"rank 1 failed: ...; rank 0 stops at step 7 with it; <resume>" at ERROR, then the
error's own resume words). The source's case, two real ranks:
tests/trainer/test_failure_rank_crash.py. Stand-ins: a trainer of what `unagreed`
reads, a `torch.distributed.DistError` in gloo's words for a lost peer (the backend's
type: `rank_failure.from_the_backend`)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from melissa_trainer.core.schedule_length import SchedulerStepError
from melissa_trainer.trainer.rank_failure import write_note
from melissa_trainer.trainer.schedule_end import ScheduleEnded
from melissa_trainer.trainer.source_failure import SourceFailure

pytestmark = pytest.mark.timeout(30)


def _trainer(out: Path, rank: int) -> Any:
    watch = SimpleNamespace(pause=contextlib.nullcontext)
    return SimpleNamespace(
        num_processes=2, process_index=rank, run_id="run", is_main_process=rank == 0,
        args=SimpleNamespace(output_dir=str(out)), checkpoint_root=out / "checkpoints",
        state=SimpleNamespace(global_step=7, last_save_step=0),
        stop_sync=SimpleNamespace(distributed=True, watch=watch),
        source=SimpleNamespace(note_stop=lambda *a: None),
    )  # fmt: skip


@pytest.mark.parametrize("noted", [True, False])
def test_a_held_scheduler_failure_whose_peer_died_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, noted: bool
) -> None:
    if noted:  # (rank 1's note, as its `failing.failed` writes it)
        write_note(_trainer(tmp_path, 1), RuntimeError("a hook's bug"))
    trainer = _trainer(tmp_path, 0)
    failure = SourceFailure(trainer)
    failed = SchedulerStepError(torch.optim.lr_scheduler.LambdaLR)
    failed.__cause__ = IndexError("list index out of range")
    failure.hold_schedule(failed)
    broke = torch.distributed.DistError("Connection closed by peer [127.0.0.1]:1969")
    with caplog.at_level(logging.INFO):
        ended = failure.unagreed(broke)
    assert isinstance(ended, ScheduleEnded), ended
    assert str(ended).startswith("training stopped at step 7: the lr_scheduler"), ended
    peer = (
        "meanwhile rank 1 failed: RuntimeError: a hook's bug (see rank 1's log)"
        if noted
        # (no mark made here: the peer's pid is not checked, its end not guessed)
        else "meanwhile another rank is gone and left no note of why (rank 1, the only "
        "other: not checked from here: killed by a signal, or a network error?"
    )
    assert any(note.startswith(peer) for note in ended.__notes__), ended.__notes__
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], errors  # (the peer's end is in the error's note, said once)
