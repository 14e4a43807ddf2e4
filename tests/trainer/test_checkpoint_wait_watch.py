"""Every collective of a checkpoint's save runs inside the trainer's wait watch
(`core.wait_watch`, `trainer.rank_reports`): a rank held there by another (stopped,
hung, slow to write its files) warns, naming the checkpoint, the save's step and the
collective, instead of waiting silently until the process group's timeout.

One process, whose collectives are fakes (torch.distributed's functions replaced, the
trainer's `StopSync.distributed` set): each records whether a wait was watched when it
ran, and one blocks on an event until the warning is logged. The real two-rank run:
tests/trainer/test_stopped_rank_watch.py."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402
from wait_said import WAIT, Said  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.core.wait_watch import WaitWatch  # noqa: E402


def trained(tmp_path: Path) -> OnlineTrainer:
    """A trainer of one process after 2 steps, then made to run its collectives (fakes)."""
    args = TrainingArguments(
        output_dir=str(tmp_path), batch_size=4, buffer="fifo", buffer_size=32, watermark=4,
        max_steps=2, report_to="none", disable_progress_bar=True, save_at_end=False,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(64, seed=rank)),
        process_sample=xy,
    )  # fmt: skip
    trainer.train()
    trainer.stop_sync.distributed = True  # (one rank: each fake leaves its own values)
    return trainer


def fake_collectives(monkeypatch: pytest.MonkeyPatch, on_call: Callable[[str], None]) -> None:
    """torch.distributed's collectives that the save path runs, as fakes of one rank
    that call `on_call` with the collective's name first."""
    dist = torch.distributed

    def gather(out: list[Any], obj: Any, *a: Any, **k: Any) -> None:
        on_call("all_gather_object")
        out[0] = obj

    def reduce(*a: Any, **k: Any) -> None:
        on_call("all_reduce")

    def broadcast(*a: Any, **k: Any) -> None:
        on_call("broadcast_object_list")

    monkeypatch.setattr(dist, "all_gather_object", gather)
    monkeypatch.setattr(dist, "all_reduce", reduce)
    monkeypatch.setattr(dist, "broadcast_object_list", broadcast)


@pytest.mark.timeout(120)
def test_every_collective_of_a_save_and_a_resume_check_is_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = trained(tmp_path)
    watch = trainer.stop_sync.watch
    calls: list[tuple[str, str | None]] = []
    fake_collectives(monkeypatch, lambda name: calls.append((name, watch._what)))
    path = trainer.save_checkpoint()
    assert path is not None and path.name == "checkpoint-2"
    # the samples seen; the four steps' reports; the report after the hooks' on_save
    assert [c for c, _ in calls] == ["all_reduce"] + ["all_gather_object"] * 5, calls
    assert all(what is not None and "checkpoint-2's save" in what for _, what in calls), calls
    assert "step 2 of 4 (every rank writes its files)" in str(calls[2][1]), calls
    calls.clear()
    from melissa_trainer.trainer.checkpointing import verify

    assert verify(trainer, path) == []
    assert calls and all(what is not None and "checkpoint-2's check" in what for _, what in calls)


@pytest.mark.timeout(120)
def test_a_save_held_in_its_all_gather_warns_naming_where_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    trainer = trained(tmp_path)
    trainer.stop_sync.watch = WaitWatch(rank=0, first=0.001)  # (as the trainer's tests set it)
    release, gathers = threading.Event(), []

    def on_call(name: str) -> None:
        if name == "all_gather_object":
            gathers.append(name)
            if len(gathers) == 2:  # after every rank wrote its files: the other is late
                assert release.wait(WAIT)

    fake_collectives(monkeypatch, on_call)
    saved: list[Path | None] = []
    thread = threading.Thread(target=lambda: saved.append(trainer.save_checkpoint()))
    thread.start()
    held = "checkpoint-2's save, step 2 of 4 (every rank writes its files)"
    try:
        first = said.heard(held, WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    assert first is not None, said.messages
    assert first.startswith("rank 0 has waited"), first
    assert "a checkpoint's all-gather" in first and "checkpoint files" in first, first
    assert "stopped (SIGSTOP" in first and "kill -CONT PID" in first, first
    assert "waiting for its data" not in first, first  # (the stop agreement's cause)
    assert any(m.startswith(f"rank 0: the other ranks at {held}") for m in said.messages)
    assert saved and saved[0] is not None and (saved[0] / "manifest.json").is_file()
