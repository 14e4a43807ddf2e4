"""Preemption of a trainer in this process: SIGTERM checkpoints the step it stops at
(without `save_steps`), raises `Preempted`, and a resumed run completes; a rank waiting
for data notices the signal.

The tests signal the pytest process itself (the trainer's `PreemptionHandler` restores
pytest's handlers).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples
from preemption_runs import make_trainer
from signal_when import signal_when
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import Hook, Preempted, TrainerControl, TrainerState
from melissa_trainer.buffers import Buffer
from melissa_trainer.common.checkpoint_names import list_checkpoints
from melissa_trainer.sources.source import Source


class SignalAt(Hook):
    """Sends `sig` to this process at the end of step `step`; records the end events."""

    def __init__(self, step: int, sig: int = signal.SIGTERM) -> None:
        self.step, self.sig = step, sig
        self.events: list[str] = []

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == self.step:
            os.kill(os.getpid(), self.sig)

    def on_loop_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append(f"loop_end@{state.global_step}:{trainer.preempted_by!r}")

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        self.events.append(f"save@{state.global_step}")

    def on_preempted(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        # (a user hook sees the source's lifecycle too; a request here comes after the
        # last action point: warned about, not performed)
        self.events.append(f"preempted@{state.global_step}:{trainer.preempted_by!r}")
        control.should_save = True

    def on_train_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append(f"train_end@{state.global_step}")


@pytest.mark.timeout(60)
def test_sigterm_in_process_checkpoints_the_step_raises_preempted_and_resume_completes(
    tmp_path: Path, caplog: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    before = signal.getsignal(signal.SIGTERM)
    hook = SignalAt(3)
    trainer = make_trainer(out, list(linear_samples(400)), [hook], save_at_end=False)
    with pytest.raises(Preempted) as info:
        trainer.train()
    step = info.value.step
    assert info.value.code == 143 and trainer.state.global_step == step >= 3
    assert trainer.preempted_by == signal.SIGTERM
    # a checkpoint of that step although save_steps is None and save_at_end False
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == [f"checkpoint-{step}"]
    assert info.value.checkpoint == str(out / "checkpoints" / f"checkpoint-{step}")
    assert hook.events == [f"loop_end@{step}:<Signals.SIGTERM: 15>", f"save@{step}",
                           f"preempted@{step}:<Signals.SIGTERM: 15>",
                           f"train_end@{step}"]  # fmt: skip
    assert "a hook set should_save after the last action point (in on_preempted" in caplog.text
    assert signal.getsignal(signal.SIGTERM) is before
    printed = capsys.readouterr().out  # the last line says it stopped, not that it ended
    assert f"step {step} | stopped by SIGTERM: each sample trained on" in printed
    assert "end of training" not in printed

    resumed = make_trainer(
        out, list(linear_samples(400)), [], save_at_end=False, resume_from_checkpoint="latest"
    )
    state = resumed.train()
    assert state.global_step == 400 // 8 and resumed.preempted_by is None
    assert f"step {state.global_step} | end of training" in capsys.readouterr().out


class Starved(Source):
    """Puts `first` samples at start, then nothing, and never ends the stream: the
    trainer waits for data that does not come (a starved rank)."""

    def __init__(self, first: int) -> None:
        self.first = first
        self.buffer: Buffer | None = None
        self.waiting = threading.Event()  # set once the trainer waits for more data

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        self.buffer = buffer
        for sample in linear_samples(self.first):
            buffer.put(sample)

    def wait_for(self, n_samples: int, timeout: float) -> None:
        self.waiting.set()
        time.sleep(timeout)  # a source with nothing to come: its wait is what is tested

    def stop(self) -> None:
        pass


@pytest.mark.timeout(30)
def test_a_rank_waiting_for_data_notices_the_signal(tmp_path: Path) -> None:
    source = Starved(20)  # two batches of 8, then nothing: the third never comes
    trainer = make_trainer(tmp_path / "out", source, [], stop_sync_steps=4)

    def starved() -> None:
        # step 1 (a run's first window is one step), then the second batch taken: the
        # rest of the window waits for data
        def taken() -> bool:
            return trainer.state.global_step == 1 and trainer.dataset.num_pending >= 1

        wait_until(taken, "the first step and the second batch", timeout=UNTIL_TEST_TIMEOUT)
        assert source.waiting.wait(20), "the trainer never waited for data"

    with signal_when(starved), pytest.raises(Preempted) as info:
        trainer.train()
    # stopped before its window: the second batch taken is in the checkpoint, untrained
    assert info.value.step == 1
    assert (Path(info.value.checkpoint) / "trainer_state.json").is_file()
