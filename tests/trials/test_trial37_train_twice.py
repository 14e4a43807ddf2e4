"""User trial 37 (an engineer who knows Hugging Face `Trainer`), severity MEDIUM.

What a user did: in a notebook, ran ``trainer.train()``, stopped it with Ctrl-C (a
`Preempted`, its checkpoint written) or let it end, and ran the cell ``trainer.train()``
again, as Hugging Face's `Trainer` allows (its ``train()`` may be called again).

What happened: ``RuntimeError: IterableSource.start() was called twice`` (a
`StreamSource`: ``StreamSource.start() was called twice``), from deep inside the
library: a message about an internal object that says neither what the user did wrong
nor how to go on; with ``resume_from_checkpoint`` set, the second call also loaded the
latest checkpoint again and fired ``on_load`` before failing.

What was expected: a refusal, before anything is loaded, that names the call (``train()``
on a trainer that has trained already), why (its stream was consumed: a trainer trains
once), and the fix (a new `OnlineTrainer` with ``resume_from_checkpoint='latest'``,
which continues from the last checkpoint); the output directory left free for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)


class Loads(Hook):
    def __init__(self) -> None:
        self.loads: list[str] = []

    def on_load(self, trainer, state, control, path):  # type: ignore[no-untyped-def]
        self.loads.append(path)


def _trainer(out: Path, hook: Loads, **kw: object) -> OnlineTrainer:
    model = small_model()
    settings: dict[str, object] = {"max_steps": 6, **kw}
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=4,
        stop_sync_steps=2,
        report_to="none",
        disable_progress_bar=True,
        **settings,  # type: ignore[arg-type]
    )
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), 1e-2),
        train_source=lambda rank, world: linear_samples(400),
        process_sample=xy,
        hooks=[hook],
    )


def test_a_second_train_on_one_trainer_is_refused_naming_the_fix(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _trainer(out, Loads()).train()  # checkpoint-6
    hook = Loads()
    trainer = _trainer(out, hook, resume_from_checkpoint="latest", max_steps=8)
    trainer.train()  # resumed from checkpoint-6, to step 8
    assert len(hook.loads) == 1
    with pytest.raises(RuntimeError) as info:
        trainer.train()
    said = str(info.value)
    assert "train()" in said and "start() was called twice" not in said, said
    assert "new OnlineTrainer" in said and "resume_from_checkpoint" in said, said
    assert len(hook.loads) == 1  # refused before any checkpoint was loaded again
    assert trainer.state.global_step == 8
    # the output directory is free: the fix the message names works
    again = _trainer(out, Loads(), resume_from_checkpoint="latest", max_steps=10)
    assert again.train().global_step == 10


def test_a_train_refused_before_its_source_started_may_be_retried(tmp_path: Path) -> None:
    """A `train()` refused before the source started (a schedule shorter than
    max_steps: `ScheduleEnded`) leaves the source startable: a retry gets the same
    refusal, not "trained already"."""
    from melissa_trainer import ScheduleEnded

    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), 1e-2)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=4,
        max_steps=10,
        report_to="none",
        disable_progress_bar=True,
    )
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=5),
        train_source=lambda rank, world: linear_samples(400),
        process_sample=xy,
    )
    for _ in range(2):
        with pytest.raises(ScheduleEnded, match="max_steps 10 is past the end of the lr_scheduler"):
            trainer.train()
    assert not trainer.train_started
