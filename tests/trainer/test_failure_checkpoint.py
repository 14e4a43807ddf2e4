"""A source that fails once training has gone on for a while keeps that training: the
model is fine, only its data failed, so a single process writes a checkpoint of the step
it stopped at, as a preemption does, and the line says where it is and how to resume
(a user trial: a study failed at step 288 before the first periodic save, at
save_seconds=600, and ended with "no checkpoint was written"). The exit status stays 1.
Under several ranks the ranks agree on the failure first (`trainer.source_failure`) and
save together; one that they could not agree on writes none, and the line says why and
what sets how often one is written."""

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
    with pytest.raises(SourceError, match="the producer failed"):
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


def test_several_ranks_write_none_unless_they_agreed_and_say_why(tmp_path: Path) -> None:
    """Under several ranks no collective save is tried unless the ranks agreed on the
    failure (`source_failure`: then every rank calls it at the same step); the reason
    names it."""
    state = SimpleNamespace(global_step=5, last_save_step=0)
    view = SimpleNamespace(num_processes=2, state=state, checkpoint_root=tmp_path)
    view.save_checkpoint = lambda: pytest.fail("a collective save the ranks did not agree on")
    written, why = save_at_failure(view)  # type: ignore[arg-type]
    assert written is None and "could not agree on a step" in why
    checked: list[int] = []
    view.save_checkpoint = lambda: tmp_path / "checkpoint-5"
    written, why = save_at_failure(view, lambda: checked.append(5), together=True)  # type: ignore[arg-type]
    assert (written, why, checked) == (tmp_path / "checkpoint-5", "", [5])


class Distributed(SimpleNamespace):
    """What `SourceFailure` reads of a trainer, under two ranks: its dataset's `prefetch`
    raises `error` once `fail` is set, with two batches pending."""

    def __init__(self, tmp_path: Path, error: SourceError) -> None:
        self.fail = False

        def prefetch(n: int, interrupted: Any = None) -> int:
            if self.fail:
                raise error
            return n

        super().__init__(
            num_processes=2, process_index=1, run_id="run",
            args=SimpleNamespace(output_dir=str(tmp_path)),
            stop_sync=SimpleNamespace(distributed=True), state=SimpleNamespace(global_step=7),
            dataset=SimpleNamespace(prefetch=prefetch, num_pending=2),
        )  # fmt: skip


def test_a_rank_holds_its_source_failure_for_the_agreement(tmp_path: Path) -> None:
    from melissa_trainer.trainer.rank_failure import NOTES_DIR
    from melissa_trainer.trainer.source_failure import SourceFailure

    error = SourceError("the simulation study failed: 3 simulations failed")
    trainer = Distributed(tmp_path, error)
    failure = SourceFailure(trainer)  # type: ignore[arg-type]
    assert failure.prefetch(4) == 4 and failure.code == 0
    trainer.fail = True
    assert failure.prefetch(4) == 2  # the batches pending, not the error
    assert failure.code == 2  # (rank 1, as rank + 1)
    assert failure.prefetch(1) == 1  # no more reads
    note = (tmp_path / NOTES_DIR / "rank-1").read_text()
    assert note == "run\nSourceError: the simulation study failed: 3 simulations failed\n"
    assert failure.agreed_on(1, lambda: None) is error and failure.agreed


def test_a_failure_with_a_cause_is_raised_at_once_under_several_ranks(tmp_path: Path) -> None:
    from melissa_trainer.trainer.source_failure import SourceFailure

    error = SourceError("the receiver's thread failed")
    error.__cause__ = ValueError("a bug")  # (its traceback is the user's: not held)
    trainer = Distributed(tmp_path, error)
    trainer.fail = True
    failure = SourceFailure(trainer)  # type: ignore[arg-type]
    with pytest.raises(SourceError, match="the receiver's thread failed"):
        failure.prefetch(4)
    assert failure.error is None and failure.code == 0
