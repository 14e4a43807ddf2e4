"""The training loop on one process: counters, hooks, stop, pseudo-epochs, resume."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import Recorder, linear_samples, small_model, xy

from melissa_trainer import (
    Hook,
    OnlineTrainer,
    SourceError,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from melissa_trainer.core.accelerated import AcceleratedStep, PlainStep
from melissa_trainer.core.cpu_launch import cpu_only_launch
from melissa_trainer.sources.iterable import IterableSource

pytestmark = pytest.mark.timeout(60)


def make_args(tmp_path: Path, **overrides: Any) -> TrainingArguments:
    base = dict(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",  # each sample once: the step counts below rely on it
        buffer_size=64,
        watermark=1,
        logging_steps=5,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
        stop_sync_steps=4,
    )
    base.update(overrides)
    return TrainingArguments(**base)


def make_trainer(args: TrainingArguments, n: int = 80, hooks=(), seed: int = 0, **kw: Any):
    model = small_model(seed, dropout=kw.pop("dropout", 0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=kw.pop("lr", 1e-2))
    return OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=kw.pop("source", None) or list(linear_samples(n, seed)),
        process_sample=xy,
        hooks=hooks,
        **kw,
    )


def test_trains_until_the_stream_ends(tmp_path: Path) -> None:
    rec = Recorder()
    trainer = make_trainer(make_args(tmp_path), n=83, hooks=[rec])
    state = trainer.train()
    # 83 samples in batches of 8: ten full batches, then a last one of 3.
    assert state.global_step == 11
    assert state.samples_seen == 83
    assert state.stream_ended
    assert len(rec.losses) == 11
    assert rec.events[0] == "train_start"
    assert rec.events[-2:] == ["end_of_stream@11", "train_end@11"]
    assert [log["step"] for log in rec.logs] == [5, 10, 11]
    assert rec.logs[-1]["buffer_got"] == 83
    assert trainer.buffer.stats().got == 83


def test_loss_decreases(tmp_path: Path) -> None:
    rec = Recorder()
    make_trainer(make_args(tmp_path, batch_size=16, buffer_size=512), n=4000, hooks=[rec]).train()
    assert np.mean(rec.losses[-20:]) < 0.1 * np.mean(rec.losses[:5])


def test_max_steps_stops_exactly(tmp_path: Path) -> None:
    state = make_trainer(make_args(tmp_path, max_steps=7), n=800).train()
    assert state.global_step == 7
    assert state.samples_seen == 56
    assert not state.stream_ended


def test_gradient_accumulation_counts_optimizer_steps(tmp_path: Path) -> None:
    rec = Recorder()
    args = make_args(tmp_path, gradient_accumulation_steps=2, batch_size=4)
    state = make_trainer(args, n=40, hooks=[rec]).train()
    assert state.global_step == 5  # 10 micro-batches of 4
    assert len(rec.losses) == 10


def test_hook_stop_takes_effect_at_the_next_sync(tmp_path: Path) -> None:
    class StopAt5(Hook):
        def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
            if state.global_step == 5:
                control.should_stop = True

    state = make_trainer(make_args(tmp_path, stop_sync_steps=4), n=800, hooks=[StopAt5()]).train()
    assert state.global_step == 8


def test_pseudo_epochs_replay_the_stream(tmp_path: Path) -> None:
    rec = Recorder()
    args = make_args(tmp_path, pseudo_epochs=3, buffer="firo")
    state = make_trainer(args, n=40, hooks=[rec]).train()
    assert state.pseudo_epoch == 2
    assert state.global_step == 15
    assert state.samples_seen == 120
    assert "pseudo_epoch_start:1" in rec.events and "pseudo_epoch_start:2" in rec.events


def test_validation_and_best_metric(tmp_path: Path) -> None:
    validation = list(linear_samples(20, seed=99))
    args = make_args(tmp_path, eval_steps=5)
    trainer = make_trainer(args, n=160, eval_dataset=validation)
    state = trainer.train()
    evals = [h for h in state.log_history if "eval_loss" in h]
    assert [h["step"] for h in evals] == [5.0, 10.0, 15.0, 20.0]
    assert state.best_metric == min(h["eval_loss"] for h in evals)
    # evaluate() equals a hand computation over the whole set
    model = trainer.accelerator.unwrap_model(trainer.model)
    device = next(model.parameters()).device  # the trainer placed it (CUDA when present)
    with torch.no_grad():
        x = torch.stack([xy(s)[0] for s in validation]).to(device)
        y = torch.stack([xy(s)[1] for s in validation]).to(device)
        expected = torch.nn.functional.mse_loss(model(x), y).item()
    assert trainer.evaluate()["eval_loss"] == pytest.approx(expected, rel=1e-5)


def test_early_stopping_stops_when_no_improvement(tmp_path: Path) -> None:
    validation = list(linear_samples(16, seed=99))
    args = make_args(tmp_path, eval_steps=2, early_stopping_patience=2, stop_sync_steps=1)
    state = make_trainer(args, n=8000, eval_dataset=validation, lr=0.0).train()
    # lr 0: the metric never improves after the first validation (step 2); two more
    # validations without improvement (steps 4 and 6) exhaust the patience.
    assert state.global_step == 6


def test_source_failure_surfaces_instead_of_hanging(tmp_path: Path) -> None:
    def broken():
        yield from linear_samples(20)
        raise RuntimeError("simulator crashed")

    trainer = make_trainer(make_args(tmp_path), source=broken())
    with pytest.raises(SourceError, match="simulator crashed"):
        trainer.train()
    assert not any(t.name == "melissa-source" for t in threading.enumerate())


def test_wrong_batch_layout_has_a_clear_error(tmp_path: Path) -> None:
    args = make_args(tmp_path)
    model = small_model()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=list(linear_samples(16)),
    )
    with pytest.raises(TypeError, match="compute_loss"):
        trainer.train()


def test_checkpoints_rotate_and_are_complete(tmp_path: Path) -> None:
    args = make_args(tmp_path, save_steps=2, max_to_keep=2, save_at_end=True)
    trainer = make_trainer(args, n=80)
    trainer.train()
    root = Path(args.output_dir) / "checkpoints"
    names = sorted(p.name for p in root.iterdir() if p.is_dir())  # (and history.json)
    assert names == ["checkpoint-10", "checkpoint-8"]
    for name in names:
        files = {p.name for p in (root / name).iterdir()}
        assert {"model.safetensors", "trainer_state.json", "hooks.json", "rank_0"} <= files


def test_scheduler_steps_once_per_optimizer_step(tmp_path: Path) -> None:
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
    args = make_args(tmp_path, gradient_accumulation_steps=2, batch_size=4)
    trainer = OnlineTrainer(
        model, args, optimizer, scheduler, train_source=list(linear_samples(40)), process_sample=xy
    )
    trainer.train()
    assert scheduler.last_epoch == 5
    assert trainer.state.log_history[-1]["learning_rate"] == pytest.approx(1.0 / 6)


def test_bf16_mixed_precision_trains_on_cpu(tmp_path: Path) -> None:
    rec = Recorder()
    args = make_args(tmp_path, mixed_precision="bf16", max_steps=10)
    trainer = make_trainer(args, n=800, hooks=[rec])
    assert isinstance(trainer._step, PlainStep)  # no grad scaler: the plain path, autocast
    assert trainer._step.autocast is not None
    state = trainer.train()
    assert state.global_step == 10
    assert all(np.isfinite(rec.losses))


@pytest.mark.parametrize("precision", ["no", "bf16"])
@pytest.mark.parametrize("accumulation", [1, 3])
def test_the_plain_and_the_accelerate_step_give_identical_weights(
    tmp_path: Path, accumulation: int, precision: str
) -> None:
    """The fast path is only a faster way to the same arithmetic, bit for bit (bf16
    too: the same autocast context around the loss)."""

    def run(plain: bool) -> tuple[list[torch.Tensor], list[float], OnlineTrainer]:
        args = make_args(tmp_path / str(plain), buffer="fifo", batch_size=4,
                         gradient_accumulation_steps=accumulation,
                         mixed_precision=precision)  # fmt: skip
        model = small_model(0, dropout=0.2)  # dropout: the RNG stream must match too
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
        rec = Recorder()
        samples = list(linear_samples(120))
        trainer = OnlineTrainer(
            model, args, optimizer, scheduler, train_source=samples, process_sample=xy, hooks=[rec]
        )
        assert isinstance(trainer._step, PlainStep)  # what this configuration picks
        if not plain:
            acc, loss = trainer.accelerator, trainer.compute_loss
            trainer._step = AcceleratedStep(acc, trainer.model, trainer.optimizer, scheduler, loss)
        trainer.train()
        assert trainer.state.global_step == 30 // accumulation
        weights = [p.detach().clone() for p in trainer.model.parameters()]
        return weights, rec.losses, trainer

    fast, fast_losses, fast_trainer = run(plain=True)
    slow, slow_losses, slow_trainer = run(plain=False)
    assert fast_losses == slow_losses
    assert all(torch.equal(a, b) for a, b in zip(fast, slow, strict=True))
    assert fast_trainer.lr_scheduler.get_last_lr() == slow_trainer.lr_scheduler.get_last_lr()


def launch_env(
    monkeypatch: pytest.MonkeyPatch, world: int, local: int, gpus: int, use_cpu: str = "False"
) -> None:
    """This process as one rank of `accelerate launch --multi_gpu` (torchrun's variables)
    on a node with `gpus` visible GPUs."""
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))
    monkeypatch.setenv("ACCELERATE_USE_CPU", use_cpu)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)


def test_more_processes_than_gpus_fails_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 ranks on 1 GPU: a clear error naming the fixes, not NCCL's "Duplicate GPU
    detected" at the first collective (Accelerate maps both ranks to cuda:0)."""
    launch_env(monkeypatch, world=2, local=2, gpus=1)
    with pytest.raises(
        RuntimeError,
        match=r"^2 processes on this node but 1 visible GPU.*--num_processes 1.*"
        r"CUDA_VISIBLE_DEVICES=''",
    ):
        make_trainer(make_args(tmp_path))


@pytest.mark.parametrize(
    ("world", "local", "gpus", "use_cpu", "cpu"),
    [
        (1, 1, 0, "False", False),  # one process: Accelerate decides alone
        (2, 2, 0, "False", True),  # no GPU (or CUDA_VISIBLE_DEVICES=''): gloo on CPU
        (2, 2, 1, "True", True),  # told to run on CPU: no GPU is shared
        (2, 2, 2, "False", False),  # one GPU per rank: NCCL
        (4, 2, 2, "False", False),  # two nodes of two ranks, two GPUs each
    ],
)
def test_cpu_only_launch(
    monkeypatch: pytest.MonkeyPatch, world: int, local: int, gpus: int, use_cpu: str, cpu: bool
) -> None:
    launch_env(monkeypatch, world, local, gpus, use_cpu)
    assert cpu_only_launch() is cpu


def test_more_processes_than_gpus_per_node_is_counted_per_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launch_env(monkeypatch, world=4, local=2, gpus=1)
    with pytest.raises(RuntimeError, match="^2 processes on this node but 1 visible GPU"):
        cpu_only_launch()


class _EndAwareSource(IterableSource):
    """Counts END_OF_STREAM, heard through the hook it gives the trainer (as a `Study`
    does), and notes whether `stop` came after it."""

    def __init__(self, n: int) -> None:
        super().__init__(list(linear_samples(n)))
        self.ends, self.stops_after_end = 0, 0

    def hooks(self, args: TrainingArguments) -> list[Hook]:
        source = self

        class Ends(Hook):
            def on_end_of_stream(self, trainer: Any, state: Any, control: Any) -> None:
                source.ends += 1

        return [Ends()]

    def stop(self) -> None:
        self.stops_after_end += self.ends > 0
        super().stop()


@pytest.mark.parametrize("max_steps", [None, 5])
def test_the_source_hears_of_the_end_of_the_stream_before_it_stops(
    tmp_path: Path, max_steps: int | None
) -> None:
    """A `Study` waits for its last simulations only at the end of the stream: the
    trainer tells the source, before `stop`, and not when `max_steps` stopped it."""
    source = _EndAwareSource(83)
    make_trainer(make_args(tmp_path, max_steps=max_steps), source=source).train()
    assert source.ends == (1 if max_steps is None else 0)
    assert (source.stops_after_end > 0) == (max_steps is None)
