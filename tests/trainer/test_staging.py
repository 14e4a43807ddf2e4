"""Batches staged one step ahead (`melissa_trainer.core.staging`) train what unstaged ones do.

The oracle is the run with ``stage_batches=False`` (today's path: collate and send when
the step starts) and, independently, the FIFO order: micro-batch j holds samples
[8 j, 8 j + 8).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.buffers import SampleBlock, make_buffer
from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.core.dataset import StreamDataset
from melissa_trainer.core.staging import BatchStager

pytestmark = pytest.mark.timeout(120)

BATCH = 8


def samples(n: int) -> Iterator[dict[str, np.ndarray]]:
    """`linear_samples` with a ``simulation_id`` (10 samples per simulation)."""
    for s in linear_samples(n, seed=5):
        yield {**s, "simulation_id": np.asarray(int(s["index"]) // 10, np.int64)}


def noisy_collate(examples: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs with noise from torch's RNG: staging must keep the RNG's order."""
    x = torch.stack([e[0] for e in examples])
    y = torch.stack([e[1] for e in examples])
    return x + 0.1 * torch.randn_like(x), y


def columnar(block: SampleBlock) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(block.fields["x"]), torch.from_numpy(block.fields["y"])


class Trace(Hook):
    """Per micro-batch: the loss, the samples' indices and simulation ids the dataset
    says it trains on, and whether the batch's targets are those samples'."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.indices: list[list[int]] = []
        self.simulation_ids: list[list[int]] = []
        self.targets_match: list[bool] = []
        self.save_at: int | None = None  # save in on_step_start of this step (0-based)

    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == self.save_at:
            trainer.save_checkpoint()  # while the step's first batch is staged

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        last = trainer.dataset.last_samples
        self.indices.append([int(s["index"]) for s in last])
        self.simulation_ids.append([int(i) for i in trainer.dataset.last_simulation_ids])
        expected = torch.from_numpy(np.stack([s["y"] for s in last]))
        self.targets_match.append(bool(torch.equal(batch[1].cpu(), expected)))

    def on_after_backward(self, trainer: Any, state: Any, control: Any, loss: Any) -> None:
        self.losses.append(float(loss))


def run(
    out: Path,
    *,
    stage: bool,
    columns: bool = False,
    default_collate: bool = False,
    save_at: int | None = None,
    **over: Any,
) -> tuple[OnlineTrainer, Trace]:
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=BATCH,
        buffer="fifo",  # each sample once, in order: the oracle below
        buffer_size=64,
        logging_steps=4,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
        stop_sync_steps=3,
        simulation_loss_steps=2,  # the tracked-loss path reads last_simulation_ids
        stage_batches=stage,
        **over,
    )
    trace = Trace()
    trace.save_at = save_at
    model = small_model(0, dropout=0.2)  # dropout: the RNG's order matters
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batching: dict[str, Any] = (
        {"process_batch": columnar}
        if columns
        else {"process_sample": xy}
        if default_collate
        else {"process_sample": xy, "collate_fn": noisy_collate}
    )
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=lambda rank, world: samples(200),
        hooks=[trace],
        **batching,
    )
    trainer.train()
    return trainer, trace


@pytest.mark.parametrize(
    "batching", ["per-sample", "process_batch", "default collate"]
)  # the last: fast_collate, the default
@pytest.mark.parametrize("accumulation", [1, 2])
def test_staging_trains_the_same_samples_and_losses(
    tmp_path: Path, batching: str, accumulation: int
) -> None:
    kw: dict[str, Any] = {
        "columns": batching == "process_batch",
        "default_collate": batching == "default collate",
        "gradient_accumulation_steps": accumulation,
    }
    plain_trainer, plain = run(tmp_path / "plain", stage=False, **kw)
    staged_trainer, staged = run(tmp_path / "staged", stage=True, **kw)
    assert staged_trainer._stager is not None and plain_trainer._stager is None
    micro = (200 // BATCH) // accumulation * accumulation  # a step's batches, all full
    fifo = [list(range(BATCH * j, BATCH * (j + 1))) for j in range(micro)]
    assert plain.indices == fifo  # the independent oracle: FIFO order
    assert staged.indices == fifo
    assert staged.simulation_ids == [[i // 10 for i in b] for b in fifo]
    assert all(staged.targets_match) and all(plain.targets_match)
    assert staged.losses == plain.losses  # bit for bit: same batches, same RNG draws
    assert dict(staged_trainer.simulation_losses) == dict(plain_trainer.simulation_losses)
    assert staged_trainer.state.global_step == plain_trainer.state.global_step


def test_a_checkpoint_with_a_staged_batch_resumes_exactly(tmp_path: Path) -> None:
    # process_batch without RNG draws (dropout only): a resume collates the saved
    # pending batch again
    kw: dict[str, Any] = {"columns": True, "max_steps": 20}
    _, full = run(tmp_path / "full", stage=True, **kw)
    # step 7 starts mid-window (windows of 3): its first batch is staged when it saves
    _, saving = run(tmp_path / "split", stage=True, save_at=7, **kw)
    assert saving.losses == full.losses
    saved = latest_checkpoint(tmp_path / "split" / "checkpoints")
    assert saved is not None and saved.name == "checkpoint-7"
    resumed_trainer, resumed = run(
        tmp_path / "split", stage=True, resume_from_checkpoint=str(saved), **kw
    )
    assert resumed_trainer.state.global_step == 20
    assert resumed.losses == full.losses[7:]
    assert resumed.indices == full.indices[7:]


def test_stager_leaves_the_staged_batch_pending(tmp_path: Path) -> None:
    buffer = make_buffer(TrainingArguments(buffer="fifo", buffer_size=64).buffer_config())
    for s in linear_samples(24):
        buffer.put(s)
    buffer.close()
    dataset = StreamDataset(buffer, BATCH, process_sample=xy)
    assert dataset.prefetch(3) == 3
    stager = BatchStager(dataset, torch.device("cpu"))
    stager.stage()
    assert stager.staged and dataset.num_pending == 3  # staged, still pending
    dataset.save(tmp_path / "pending")
    restored = StreamDataset(buffer, BATCH, process_sample=xy)
    restored.load(tmp_path / "pending")
    for _ in range(3):
        (x, y), n = stager.next_batch()
        (rx, ry), rn = restored.next_batch()
        assert n == rn == BATCH and torch.equal(x, rx) and torch.equal(y, ry)
    with pytest.raises(IndexError, match="no pending batch: call StreamDataset.prefetch first"):
        stager.next_batch()


def test_an_outdated_staged_batch_is_not_served() -> None:
    buffer = make_buffer(TrainingArguments(buffer="fifo", buffer_size=64).buffer_config())
    for s in linear_samples(16):
        buffer.put(s)
    buffer.close()
    dataset = StreamDataset(buffer, BATCH, process_sample=xy)
    dataset.prefetch(1)
    stager = BatchStager(dataset, torch.device("cpu"))
    stager.stage()
    dataset.take_pending()  # taken behind the stager's back (a load replaces them too)
    dataset.prefetch(1)
    (x, _), _ = stager.next_batch()
    assert [int(s["index"]) for s in dataset.last_samples] == list(range(8, 16))
    assert torch.equal(x, torch.stack([torch.from_numpy(s["x"]) for s in dataset.last_samples]))
