"""What a hook can read about the batch being trained: `trainer.dataset.last_samples`,
as docs/how-to/hooks.md ("Which samples a step trains on") promises it.

The contract pinned here:

* in `on_batch_ready`, `on_sample_losses` and `on_after_backward` of a micro-batch it
  holds that micro-batch's raw samples, in the batch's row order (row i of the collated
  batch is sample i; `on_sample_losses`' ``simulation_ids`` are theirs);
* under gradient accumulation each micro-batch has its own; in `on_step_end` (and the
  actions after it: log, validation, save) it still holds the step's *last*
  micro-batch, and a validation does not change it; before the first micro-batch it
  is empty;
* a batch served again at an uneven end (`StreamDataset.pad`) holds copies of samples
  trained before on that rank (same ``simulation_id`` and ``time_step``);
* a pseudo-epoch's replay serves samples of the passes before (`state.pseudo_epoch`
  tells the pass);
* with `gradient_accumulation_steps` k > 1, a rank's last batches that fill no step
  (fewer than k) are never trained: docs/how-to/resize.md, "Limits".

The oracle is the FIFO order of the samples (sample i has ``index`` i, simulation
i // 10, time step i % 10), not the trainer's own counters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.buffers import SampleBlock, make_buffer
from melissa_trainer.core.dataset import StreamDataset

pytestmark = pytest.mark.timeout(120)

HOOKS_PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "hooks.md"

BATCH = 8


def samples(n: int) -> Iterator[dict[str, np.ndarray]]:
    """`linear_samples` with a ``simulation_id`` and ``time_step`` as the stream's."""
    for s in linear_samples(n, seed=3):
        i = int(s["index"])
        yield {
            **s,
            "simulation_id": np.asarray(i // 10, np.int64),
            "time_step": np.asarray(i % 10, np.int64),
        }


def keys(batch: Any) -> list[tuple[int, int]]:
    """The documented way to read a batch's samples: ``(simulation_id, time_step)``."""
    return [(int(s["simulation_id"]), int(s["time_step"])) for s in batch]


class Reader(Hook):
    """Reads `trainer.dataset.last_samples` at every event of the contract."""

    def __init__(self) -> None:
        self.at_first_step_start: int | None = None
        self.steps: list[list[list[int]]] = []  # per step, per micro-batch: the indices
        self.pseudo_epochs: list[int] = []  # per micro-batch: state.pseudo_epoch
        self.rows_match: list[bool] = []
        self.ids_match: list[bool] = []
        self.after_backward: list[list[int]] = []
        self.at_step_end: list[list[int]] = []
        self.at_step_start: list[list[int]] = []  # but the first
        self.blocks: list[bool] = []  # per micro-batch: served as a block
        self.at_validation_end: list[list[int]] = []

    @staticmethod
    def indices(trainer: Any) -> list[int]:
        return [int(s["index"]) for s in trainer.dataset.last_samples]

    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        if self.at_first_step_start is None:
            self.at_first_step_start = len(trainer.dataset.last_samples)
        else:
            self.at_step_start.append(self.indices(trainer))
        self.steps.append([])

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        last = trainer.dataset.last_samples
        self.steps[-1].append(self.indices(trainer))
        self.blocks.append(isinstance(last, SampleBlock))
        self.pseudo_epochs.append(state.pseudo_epoch)
        inputs = torch.from_numpy(np.stack([s["x"] for s in last]))
        rows = batch["x"] if isinstance(batch, dict) else batch[0]  # (default batching: dict)
        self.rows_match.append(bool(torch.equal(rows.cpu(), inputs)))

    def on_sample_losses(
        self, trainer: Any, state: Any, control: Any, losses: Any, simulation_ids: Any
    ) -> None:
        ids = [sid for sid, _ in keys(trainer.dataset.last_samples)]
        self.ids_match.append(list(map(int, simulation_ids)) == ids == self.batch_ids())

    def batch_ids(self) -> list[int]:
        return [i // 10 for i in self.steps[-1][-1]]

    def on_after_backward(self, trainer: Any, state: Any, control: Any, loss: Any) -> None:
        self.after_backward.append(self.indices(trainer))

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.at_step_end.append(self.indices(trainer))

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        self.at_validation_end.append(self.indices(trainer))


def xy_of(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return batch["x"], batch["y"]


class DefaultBatching(OnlineTrainer):
    """No `process_sample`: the buffer serves blocks, the batch is the dict of fields."""

    def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return super().compute_loss(model, xy_of(batch))

    def compute_sample_losses(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return super().compute_sample_losses(model, xy_of(batch))


def train(
    out: Path, n: int, hooks: tuple[Hook, ...] = (), blocks: bool = False, **over: Any
) -> tuple[OnlineTrainer, Reader]:
    options: dict[str, Any] = {
        "buffer": "fifo",  # each sample once, in order: the oracle (but where replaced)
        "buffer_size": 64,
        "report_to": "none",
        "disable_progress_bar": True,
        "save_at_end": False,
        "stop_sync_steps": 4,
    }
    args = TrainingArguments(output_dir=str(out), batch_size=BATCH, **{**options, **over})
    reader = Reader()
    model = small_model(0)
    trainer = (DefaultBatching if blocks else OnlineTrainer)(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=lambda rank, world: samples(n),
        process_sample=None if blocks else xy,
        eval_dataset=list(samples(16)),
        hooks=[reader, *hooks],
    )
    trainer.train()
    return trainer, reader


@pytest.mark.parametrize(("stage", "blocks"), [(True, False), (False, False), (True, True)])
def test_each_micro_batch_names_its_own_samples_and_a_step_end_its_last(
    tmp_path: Path, stage: bool, blocks: bool
) -> None:
    trainer, reader = train(
        tmp_path, 96, blocks=blocks, gradient_accumulation_steps=3, eval_steps=2,
        stage_batches=stage,
    )  # fmt: skip
    fifo = [list(range(j, j + BATCH)) for j in range(0, 96, BATCH)]  # 12 micro-batches
    assert reader.blocks == [blocks] * 12  # (the default batching's path: blocks)
    assert reader.at_first_step_start == 0  # nothing before the first micro-batch
    assert reader.steps == [fifo[0:3], fifo[3:6], fifo[6:9], fifo[9:12]]
    assert all(reader.rows_match) and len(reader.rows_match) == 12  # row i is sample i
    assert all(reader.ids_match) and len(reader.ids_match) == 12  # on_sample_losses' ids
    assert reader.after_backward == fifo  # the same micro-batch through its backward
    # a step's end (and its actions) sees the step's last micro-batch only
    assert reader.at_step_end == [fifo[2], fifo[5], fifo[8], fifo[11]]
    assert reader.at_step_start == [fifo[2], fifo[5], fifo[8]]  # (the next one's batch staged)
    # validations at steps 2 and 4 (and none at the end: the last was at step 4) leave it
    assert reader.at_validation_end == [fifo[5], fifo[11]]
    assert trainer.state.global_step == 4


def test_batches_that_fill_no_step_are_not_trained(tmp_path: Path) -> None:
    # 25 batches of 8, 2 per step: 12 steps; the 25th batch fills no step
    trainer, reader = train(tmp_path, 200, gradient_accumulation_steps=2)
    trained = [i for step in reader.steps for batch in step for i in batch]
    assert trained == list(range(192))
    assert trainer.state.global_step == 12
    assert trainer.dataset.num_pending == 1  # taken, left untrained


def test_a_pseudo_epoch_replays_samples_of_the_passes_before(tmp_path: Path) -> None:
    _, reader = train(tmp_path, 48, pseudo_epochs=2)
    batches = [batch for step in reader.steps for batch in step]
    first = {i for b, e in zip(batches, reader.pseudo_epochs, strict=True) if e == 0 for i in b}
    again = {i for b, e in zip(batches, reader.pseudo_epochs, strict=True) if e == 1 for i in b}
    assert first == set(range(48))
    assert again and again <= first


def test_a_batch_served_again_at_an_uneven_end_holds_copies_of_trained_samples() -> None:
    # what a rank whose data ran out first trains meanwhile (`StreamDataset.pad`, which
    # the loop calls; tests/trainer/test_distributed.py runs it on two ranks)
    buffer = make_buffer(TrainingArguments(buffer="fifo", buffer_size=64).buffer_config())
    for sample in samples(24):
        buffer.put(sample)
    buffer.close()
    dataset = StreamDataset(buffer, BATCH, process_sample=xy)
    assert dataset.prefetch(3) == 3
    trained = [keys(dataset.take_pending()) for _ in range(3)]
    assert dataset.prefetch(1) == 0  # the end of this rank's stream
    assert dataset.pad(4) == 4
    again = []
    for _ in range(4):
        dataset.next_batch()
        again.append(keys(dataset.last_samples))
    assert again == [trained[0], trained[1], trained[2], trained[0]]


def test_the_pages_example_logs_the_latest_time_step_trained(tmp_path: Path) -> None:
    page = HOOKS_PAGE.read_text()
    section = page[page.index("## Which samples a step trains on") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the section's example is gone"
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), str(HOOKS_PAGE), "exec"), namespace)
    trainer, reader = train(tmp_path, 96, (namespace["LatestTimeStep"](),), logging_steps=1)
    logged = [(e["step"], e["max_time_step"]) for e in trainer.state.log_history if "loss" in e]
    batches = [batch for step in reader.steps for batch in step]  # one batch per step
    expected = [(step, float(max(i % 10 for i in batches[step - 1]))) for step in range(1, 13)]
    assert 7.0 in dict(expected).values()  # (not 9 everywhere: samples 0-7, 40-47, 80-87)
    assert logged == expected


def test_a_reservoirs_batches_name_their_samples_in_order(tmp_path: Path) -> None:
    # drawn at random, served again: the rows and the ids still match, micro-batch by
    # micro-batch
    _, reader = train(tmp_path, 64, buffer="reservoir", sample_to_insert_ratio=2, max_steps=10)
    assert len(reader.rows_match) == 10 and all(reader.rows_match)
    assert len(reader.ids_match) == 10 and all(reader.ids_match)
