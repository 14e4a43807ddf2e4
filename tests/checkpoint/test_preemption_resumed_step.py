"""A preemption at the very step a run resumed from (no optimizer step since the
resume: training waits for its window's data) rewrites that step's checkpoint with what
came since (htrial30: it kept the old one, lacking the 12 simulations that finished
after the resume, and said "its checkpoint is written"; the requeue ran them again).

Run 1 stops at step 1 with checkpoint-1 (16 samples put); run 2 resumes, receives 12
more (not a window's worth: no step) and gets SIGTERM: checkpoint-1 then holds the 28
samples put, replaced in place (one directory of that step). Over the whole run (a third
run resumes and ends the stream), every sample is trained exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import preemption_runs
import pytest
import torch
from helpers import linear_samples
from preemption_runs import make_trainer
from signal_when import signal_when
from waiting import wait_until

from melissa_trainer import OnlineTrainer, Preempted
from melissa_trainer.buffers import Buffer
from melissa_trainer.checkpoint import paths as ckpt_paths
from melissa_trainer.common.checkpoint_names import list_checkpoints
from melissa_trainer.sources.iterable import IterableSource
from melissa_trainer.sources.source import Source


class Feeds(Source):
    """Puts the samples `start..stop` of `linear_samples` at start, then nothing, and
    never ends the stream."""

    def __init__(self, start: int, stop: int) -> None:
        self.start_at, self.stop_at = start, stop
        self.waiting = threading.Event()
        self.buffer: Buffer | None = None

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        self.buffer = buffer
        for i, sample in enumerate(linear_samples(self.stop_at)):
            if i >= self.start_at:
                buffer.put(sample)

    def wait_for(self, n_samples: int, timeout: float) -> None:
        self.waiting.set()
        time.sleep(timeout)

    def stop(self) -> None:
        pass


def _preempted(trainer: OnlineTrainer, source: Feeds, step: int) -> Preempted:
    """SIGTERM once `trainer` is at `step` and waits for data: its `Preempted`."""

    def at_step_waiting() -> None:
        wait_until(lambda: trainer.state.global_step == step, f"step {step}", timeout=30)
        assert source.waiting.wait(30), "the trainer never waited for data"

    with signal_when(at_step_waiting), pytest.raises(Preempted) as info:
        trainer.train()
    return info.value


def _with_index(sample: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """`process_sample` keeping each sample's index, for `_recording`."""
    x, y = torch.from_numpy(sample["x"]), torch.from_numpy(sample["y"])
    return x, y, torch.as_tensor(sample["index"])


def _recording(trainer: OnlineTrainer, trained: list[int]) -> OnlineTrainer:
    """`trainer` (made with `_with_index`), recording the index of every sample it
    trains on."""

    def compute_loss(model: torch.nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets, index = batch
        trained.extend(int(i) for i in index.reshape(-1))
        return torch.nn.functional.mse_loss(model(inputs), targets)

    trainer.compute_loss = compute_loss  # type: ignore[method-assign]
    return trainer


def _put(checkpoint: Path) -> int:
    return int(json.loads((checkpoint / "rank_0/buffer.json").read_text())["put"])


@pytest.mark.timeout(120)
def test_a_preemption_at_the_resumed_step_checkpoints_what_came_since(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preemption_runs, "xy", _with_index)
    out, trained = tmp_path / "out", list[int]()
    first = Feeds(0, 16)
    stopped = _preempted(
        _recording(make_trainer(out, first, [], stop_sync_steps=4), trained), first, 1
    )
    assert stopped.step == 1 and _put(out / "checkpoints/checkpoint-1") == 16
    written = (out / "checkpoints/checkpoint-1/manifest.json").stat().st_mtime_ns

    second = Feeds(16, 28)  # 12 more: not a window's worth (4 batches of 8)
    resumed = make_trainer(out, second, [], stop_sync_steps=4, resume_from_checkpoint="latest")
    stopped = _preempted(_recording(resumed, trained), second, 1)
    assert stopped.step == 1 and stopped.checkpoint is not None
    assert second.buffer is not None and second.buffer.stats().put == 28  # they came
    assert _put(Path(stopped.checkpoint)) == 28, "the checkpoint of the stop lacks them"
    assert (Path(stopped.checkpoint) / "manifest.json").stat().st_mtime_ns != written
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["checkpoint-1"]
    assert not [
        p for p in (out / "checkpoints").iterdir() if p.name != "checkpoint-1" and p.is_dir()
    ]
    assert "rewriting its checkpoint checkpoint-1, which lacks what came since" in caplog.text

    # the whole run: the rest of the samples, then the end of the stream
    rest = IterableSource(list(linear_samples(64)))  # (a resume skips those put)
    last = make_trainer(out, rest, [], stop_sync_steps=4, resume_from_checkpoint="latest")
    _recording(last, trained).train()
    assert sorted(trained) == list(range(64)), "each sample trained exactly once"


@pytest.mark.timeout(120)
def test_a_preemption_with_nothing_new_since_the_resume_keeps_its_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    first = Feeds(0, 16)
    _preempted(make_trainer(out, first, [], stop_sync_steps=4), first, 1)
    written = (out / "checkpoints/checkpoint-1/manifest.json").stat().st_mtime_ns
    second = Feeds(16, 16)  # nothing new: the checkpoint holds this state
    resumed = make_trainer(out, second, [], stop_sync_steps=4, resume_from_checkpoint="latest")
    stopped = _preempted(resumed, second, 1)
    assert stopped.checkpoint is not None and stopped.step == 1
    assert (out / "checkpoints/checkpoint-1/manifest.json").stat().st_mtime_ns == written
    assert "its checkpoint checkpoint-1 holds this state already" in caplog.text


class Accounts(Source):
    """Puts 16 samples; once they are all drawn, its account changes (the last
    simulations ended, no sample sent) and the stream ends: no step after the last
    periodic save."""

    def __init__(self) -> None:
        self.account = "running"
        self.buffer: Buffer | None = None

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        self.buffer = buffer
        for sample in linear_samples(16):
            buffer.put(sample)

    def wait_for(self, n_samples: int, timeout: float) -> None:
        assert self.buffer is not None
        if timeout > 0 and self.buffer.stats().size == 0:
            self.account = "every simulation ended"
            self.buffer.close()

    def stop(self) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {"account": self.account}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.account = state["account"]


@pytest.mark.timeout(120)
def test_the_end_save_rewrites_a_checkpoint_of_its_step_that_lacks_the_account(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    trainer = make_trainer(out, Accounts(), [], stop_sync_steps=1, save_steps=1)
    trainer.train()
    last = ckpt_paths.latest_checkpoint(out / "checkpoints")
    assert last is not None and last.name == f"checkpoint-{trainer.state.global_step}"
    source = json.loads((last / "rank_0/source.json").read_text())
    assert source == {"account": "every simulation ended"}, source
