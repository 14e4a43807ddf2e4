"""`OnlineTrainer` stores a host reservoir by column (when it reads batches as blocks,
and when it reads samples of small rows that its source puts in blocks), and trains
exactly as on the plain reservoir (the oracle: the same run with `make_buffer`'s plain
store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

import melissa_trainer.trainer.setup as trainer_setup
from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.buffers import ColumnarReservoirBuffer, ReservoirBuffer, make_buffer
from melissa_trainer.buffers.columnar import SAMPLE_READS_MAX_ROW_BYTES
from melissa_trainer.sources import IterableSource
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study import Study

pytestmark = pytest.mark.timeout(60)


def _args(out: Path) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="reservoir",
        buffer_size=64,
        watermark=16,
        max_steps=60,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
    )


def _batch(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.as_tensor(block.fields["x"]), torch.as_tensor(block.fields["y"])


class BlockFed(IterableSource):
    """An in-process source that says it puts blocks, as a receiver's does (its puts
    are single samples all the same: the store's reads and evictions are what count)."""

    puts_blocks = True


def _train(out: Path, blocks: bool = True, **kwargs: Any) -> OnlineTrainer:
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    source = BlockFed(linear_samples(400)) if blocks else linear_samples(400)
    trainer = OnlineTrainer(model, _args(out), optimizer, train_source=source, **kwargs)
    trainer.train()
    return trainer


def _plain_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer's buffer built by `make_buffer` without columns (the oracle)."""
    monkeypatch.setattr(trainer_setup, "make_buffer", lambda config, **_: make_buffer(config))


@pytest.mark.parametrize("reader", ["process_batch", "process_sample"])
def test_a_columnar_reservoir_trains_as_the_plain_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """Batches read as blocks (a `process_batch`), or samples of small rows read one by
    one (a `process_sample`) from a source that puts blocks: stored by column, and the
    same training, bit for bit, as on the plain store."""
    kwargs: dict[str, Any] = {reader: _batch if reader == "process_batch" else xy}
    columnar = _train(tmp_path / "a", **kwargs)
    assert type(columnar.buffer) is ColumnarReservoirBuffer and columnar.buffer.columnar
    _plain_store(monkeypatch)
    plain = _train(tmp_path / "b", **kwargs)
    assert type(plain.buffer) is ReservoirBuffer
    assert columnar.state.global_step == plain.state.global_step == 60
    for x, y in zip(columnar.model.parameters(), plain.model.parameters(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert columnar.buffer.stats() == plain.buffer.stats()


def test_a_per_sample_function_fed_sample_by_sample_keeps_the_plain_store(
    tmp_path: Path,
) -> None:
    """An in-process source puts one sample at a time: the plain store keeps a
    reference where columns would copy each into its row, so it stays plain; read as
    blocks (a `process_batch`), the store is by column all the same."""
    assert not IterableSource.puts_blocks
    by_sample = _train(tmp_path / "a", blocks=False, process_sample=xy)
    assert type(by_sample.buffer) is ReservoirBuffer
    by_block = _train(tmp_path / "b", blocks=False, process_batch=_batch)
    assert type(by_block.buffer) is ColumnarReservoirBuffer and by_block.buffer.columnar


def test_a_receivers_sources_say_they_put_blocks() -> None:
    assert StreamSource.puts_blocks and Study.puts_blocks


def test_a_per_sample_function_keeps_large_rows_plain(tmp_path: Path) -> None:
    def wide(n: int) -> Any:  # rows above SAMPLE_READS_MAX_ROW_BYTES: held plain
        for s in linear_samples(n):
            yield {**s, "pad": np.zeros(SAMPLE_READS_MAX_ROW_BYTES // 4 + 1, np.float32)}

    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    trainer = OnlineTrainer(
        model, _args(tmp_path), optimizer, train_source=BlockFed(wide(400)), process_sample=xy
    )
    trainer.train()
    assert trainer.state.global_step == 60
    assert not trainer.buffer.columnar  # type: ignore[attr-defined]
