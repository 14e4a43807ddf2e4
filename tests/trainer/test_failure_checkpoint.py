"""A source that fails once training has gone on for a while keeps that training: the
model is fine, only its data failed, so a single process writes a checkpoint of the step
it stopped at, as a preemption does, and the line says where it is and how to resume
(a user trial: a study failed at step 288 before the first periodic save, at
save_seconds=600, and ended with "no checkpoint was written"). The exit status stays 1.
Under several ranks the failure reaches the ranks at steps of their own: no checkpoint,
and the line says why and what sets how often one is written."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from failing_source import Failing
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.buffers import Buffer
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.sources.source import Source, SourceError
from melissa_trainer.trainer.ending import save_at_failure


def trainer(tmp_path: Path, source: Source, **kwargs: Any) -> OnlineTrainer:
    import torch
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, stop_sync_steps=2, report_to="none", disable_progress_bar=True,
        **kwargs,
    )  # fmt: skip
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    return OnlineTrainer(model, args, optimizer, train_source=source, process_sample=xy)


@pytest.mark.timeout(60)
def test_a_source_failure_before_any_periodic_save_writes_a_checkpoint(
    tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.ERROR, "melissa_trainer")
    run = trainer(tmp_path, Failing(note="what a resume does"))  # (save_seconds=600: none yet)
    with pytest.raises(SourceError) as info:
        run.train()
    assert isinstance(info.value, SystemExit) and info.value.code == 1  # (never 0)
    checkpoint = tmp_path / "out" / "checkpoints" / "checkpoint-2"
    assert ckpt.latest_checkpoint(run.checkpoint_root) == checkpoint
    assert run.state.last_save_step == 2
    (message,) = [r.getMessage() for r in caplog.records if "training stopped" in r.getMessage()]
    assert message == (
        f"training stopped at step 2: the producer failed; checkpoint {checkpoint} holds "
        "this step: once the cause is fixed, resume with resume_from_checkpoint='latest' "
        "(--resume_from_checkpoint latest on the command line); what a resume does"
    )


@pytest.mark.timeout(60)
def test_the_checkpoint_written_at_the_failure_resumes(tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        trainer(tmp_path, Failing()).train()
    samples = [*linear_samples(16)]

    class Fixed(Failing):
        def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
            self.buffer = buffer
            for sample in samples:
                buffer.put(sample)

        def wait_for(self, n_samples: int, timeout: float) -> None:
            pass

    resumed = trainer(tmp_path, Fixed(), resume_from_checkpoint="latest", max_steps=3)
    state = resumed.train()
    assert state.global_step == 3  # (from step 2: the checkpoint of the failure)


def test_several_ranks_write_none_and_say_why(tmp_path: Path) -> None:
    """Under several ranks no collective save is tried (the ranks are at steps of their
    own); the reason names it."""
    state = SimpleNamespace(global_step=5, last_save_step=0)
    view = SimpleNamespace(num_processes=2, state=state, checkpoint_root=tmp_path)
    view.save_checkpoint = lambda: pytest.fail("a collective save under several ranks")
    written, why = save_at_failure(view)  # type: ignore[arg-type]
    assert written is None and "different steps" in why
