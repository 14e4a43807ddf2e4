"""`OnlineTrainer.train_ended` when a step of train()'s close raises
(`train_close.close_training`: the lock's release, the signal handlers' restore...).
Before the fix the flag was set last in train()'s ``finally``, after those steps: one
that raised left train() over yet flagged running, so that under several ranks a
collective call after it skipped its check-in (`after_train` reads the flag) and a hook
fired by it counted as one during train() (`actions`). The steps after the one that
raised still run (the output directory freed after a failed restore)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from four_step import four_step_trainer

from melissa_trainer.trainer import preemption, train_close

pytestmark = pytest.mark.timeout(60)


def test_a_train_whose_release_raised_has_ended(tmp_path: Path) -> None:
    trainer = four_step_trainer(tmp_path / "out")
    release = trainer._output_hold.release

    def fails() -> None:
        release()
        raise OSError("the lock's file went")

    trainer._output_hold.release = fails  # type: ignore[method-assign]
    with pytest.raises(OSError, match="file went"):
        trainer.train()
    assert trainer.state.global_step == 4
    assert trainer.train_ended


def test_a_failed_restore_still_frees_the_output_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = four_step_trainer(tmp_path / "out")
    restore = preemption.PreemptionHandler.restore

    def fails(self: preemption.PreemptionHandler) -> None:
        restore(self)
        raise RuntimeError("a handler could not be given back")

    monkeypatch.setattr(preemption.PreemptionHandler, "restore", fails)
    with pytest.raises(RuntimeError, match="given back"):
        trainer.train()
    assert trainer.train_ended
    lock = trainer._output_hold.lock
    assert lock is not None and not lock.active  # (released after the restore raised)


def test_an_interrupt_in_the_exit_meeting_still_restores_and_frees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A KeyboardInterrupt landing in the ranks' exit meeting (a Ctrl-C while a rank
    waits there): the signal handlers are given back, the output directory freed and
    the roll call closed all the same. Before, the meeting sat outside the steps'
    chain: the interrupt skipped all three (hrev17's reading; failed before: [])."""
    done: list[str] = []

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(train_close, "meet", interrupted)
    monkeypatch.setattr(train_close, "close_roll", lambda roll: done.append("roll"))
    trainer = SimpleNamespace(
        source=SimpleNamespace(stop=lambda: None),
        hooks=SimpleNamespace(close=lambda: None),
        stop_sync=SimpleNamespace(distributed=True, watch=SimpleNamespace(roll=None)),
        process_index=1,
        accelerator=SimpleNamespace(device="cpu"),
    )
    hold = SimpleNamespace(stopping=lambda: None, release=lambda: done.append("release"))
    handler = SimpleNamespace(
        ending=None, previous_term=lambda: None, restore=lambda: done.append("restore")
    )
    failure = SimpleNamespace(agreed=False, words="")
    with pytest.raises(KeyboardInterrupt):
        train_close.close_training(trainer, hold, handler, failure, True, 5.0)  # type: ignore[arg-type]
    assert done == ["restore", "release", "roll"]
