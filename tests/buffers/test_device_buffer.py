"""The buffer on the accelerator device (`buffer_device="accelerator"`), here on the CPU
device: the host reservoir is the oracle (same draws, same batches, same losses, the
same checkpoint format), and FIFO order is not involved: lineage is compared sample by
sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.buffers import BufferConfig, ReservoirBuffer, SampleBlock, make_buffer
from melissa_trainer.core.device_buffer import (
    DeviceBlock,
    DeviceReservoirBuffer,
    make_device_buffer,
)

pytestmark = pytest.mark.timeout(120)

CPU = torch.device("cpu")


def samples(n: int, seed: int = 5) -> list[dict[str, np.ndarray]]:
    out = []
    for s in linear_samples(n, seed=seed):
        out.append({**s, "simulation_id": np.asarray(int(s["index"]) // 10, np.int64)})
    return out


def config(**over: Any) -> BufferConfig:
    base: dict[str, Any] = dict(kind="reservoir", capacity=40, watermark=8, seed=3, batch_size=8)
    base.update(over)
    return BufferConfig(**base)


@pytest.mark.parametrize("choices", [{}, {"draw_choices": 2, "evict_choices": 3}])
def test_draws_are_the_host_reservoirs_gathered_on_the_device(choices: dict) -> None:
    host = make_buffer(config(**choices))
    device = make_device_buffer(config(**choices), CPU)
    assert (device.draw_choices, device.evict_choices) == (host.draw_choices, host.evict_choices)
    assert isinstance(device, DeviceReservoirBuffer) and isinstance(host, ReservoirBuffer)
    data = samples(200)
    for lo in range(0, 200, 25):  # blocks, as a receiver puts them; the reservoir evicts
        block = SampleBlock.from_samples(data[lo : lo + 25])
        n = host.put_available(block)  # all, or what fits without a wait
        assert n > 0 and device.put_available(block) == n
        for _ in range(3):
            a, b = host.get_block(8), device.get_block(8)
            assert isinstance(b, DeviceBlock) and not isinstance(a, DeviceBlock)
            assert set(a.fields) == set(b.fields)
            for k, v in a.fields.items():
                assert torch.equal(torch.from_numpy(v), b.fields[k]), k
            # its host samples are the drawn ones
            assert [int(s["index"]) for s in b] == [int(i) for i in a.fields["index"]]
    assert host.stats() == device.stats()


def test_single_puts_and_a_put_of_another_layout() -> None:
    device = make_device_buffer(config(capacity=16, watermark=1), CPU)
    data = samples(16)
    for s in data:
        device.put(s)
    block = device.get_block(16)
    got = sorted(int(i) for i in block.fields["index"])
    assert len(got) == 16 and set(got) <= set(range(16))
    with pytest.raises(ValueError, match="one layout"):
        device.put({"x": np.zeros(4, np.float32), "y": np.zeros(1, np.float32)})


def test_checkpoint_is_the_host_format_both_ways(tmp_path: Path) -> None:
    data = samples(120)
    device = make_device_buffer(config(), CPU)
    host = make_buffer(config())
    for buf in (device, host):
        buf.put_available(SampleBlock.from_samples(data[:60]))
        buf.get_block(8)
    device.save(tmp_path / "device")
    host.save(tmp_path / "host")
    for name in ("device", "host"):  # the same files, byte for byte
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(
            p.name for p in (tmp_path / "host").iterdir()
        )
        for f in (tmp_path / name).iterdir():
            assert f.read_bytes() == (tmp_path / "host" / f.name).read_bytes(), f.name
    # a device buffer loads a host checkpoint (and its rows come back on the device)
    loaded = make_device_buffer(config(), CPU)
    loaded.load(tmp_path / "host")
    for buf in (loaded, host):
        buf.put_available(SampleBlock.from_samples(data[60:]))
    for _ in range(5):
        a, b = host.get_block(8), loaded.get_block(8)
        for k, v in a.fields.items():
            assert torch.equal(torch.from_numpy(v), b.fields[k]), k


def test_device_buffer_needs_a_reservoir_and_block_batches(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="buffer_device='accelerator' holds a reservoir"):
        TrainingArguments(buffer="fifo", buffer_device="accelerator")
    with pytest.raises(ValueError, match="buffer_device"):
        TrainingArguments(buffer_device="gpu")
    args = TrainingArguments(output_dir=str(tmp_path), buffer_device="accelerator")
    model = small_model()
    with pytest.raises(ValueError, match="takes no process_sample"):
        OnlineTrainer(
            model,
            args,
            torch.optim.Adam(model.parameters()),
            train_source=[],
            process_sample=lambda s: s,
        )


def xy(block: SampleBlock) -> tuple[torch.Tensor, torch.Tensor]:
    """Host blocks hold numpy arrays, device blocks tensors: both as tensors."""
    return torch.as_tensor(block.fields["x"]), torch.as_tensor(block.fields["y"])


class Trace(Hook):
    def __init__(self) -> None:
        self.losses: list[float] = []
        self.indices: list[list[int]] = []
        self.simulation_ids: list[list[int]] = []

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        self.indices.append([int(s["index"]) for s in trainer.dataset.last_samples])
        self.simulation_ids.append([int(i) for i in trainer.dataset.last_simulation_ids])

    def on_after_backward(self, trainer: Any, state: Any, control: Any, loss: Any) -> None:
        self.losses.append(float(loss))


def run(out: Path, buffer_device: str, **over: Any) -> tuple[OnlineTrainer, Trace]:
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="reservoir",
        buffer_size=48,
        watermark=16,
        sample_to_insert_ratio=4,
        buffer_device=buffer_device,
        logging_steps=5,
        report_to="none",
        disable_progress_bar=True,
        stop_sync_steps=3,
        simulation_loss_steps=2,
        **over,
    )
    trace = Trace()
    model = small_model(0, dropout=0.2)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: iter(samples(160)),
        process_batch=xy,
        hooks=[trace],
    )
    trainer.train()
    return trainer, trace


def test_trains_the_host_buffers_lineage_and_losses(tmp_path: Path) -> None:
    host_trainer, host = run(tmp_path / "host", "host", save_at_end=False)
    device_trainer, device = run(tmp_path / "device", "accelerator", save_at_end=False)
    assert isinstance(device_trainer.buffer, DeviceReservoirBuffer)
    assert len(host.indices) == host_trainer.state.global_step > 30
    assert device.indices == host.indices  # the same samples, step by step
    assert (
        device.simulation_ids == host.simulation_ids == [[i // 10 for i in b] for b in host.indices]
    )
    assert device.losses == host.losses
    assert dict(device_trainer.simulation_losses) == dict(host_trainer.simulation_losses)


def test_resume_with_a_device_buffer_gives_the_uninterrupted_losses(tmp_path: Path) -> None:
    _, full = run(tmp_path / "full", "accelerator", max_steps=30, save_at_end=False)
    _, first = run(tmp_path / "split", "accelerator", max_steps=13, save_steps=4)
    assert first.losses == full.losses[:13]
    # step 8 ends mid-window (windows of 3: steps 7-9): step 9's batch, drawn from the
    # device buffer, is pending in the checkpoint
    saved = tmp_path / "split" / "checkpoints" / "checkpoint-8"
    (pending,) = saved.rglob("pending.json")
    assert len(json.loads(pending.read_text())["fields"]) == 1
    _, second = run(
        tmp_path / "split", "accelerator", max_steps=30, save_at_end=False,
        resume_from_checkpoint=str(saved),
    )  # fmt: skip
    assert second.losses == full.losses[8:]
    assert second.indices == full.indices[8:]
