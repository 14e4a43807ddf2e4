"""A user's Accelerate handlers, ``OnlineTrainer(..., kwargs_handlers=[...])`` (the
name and objects of ``Accelerator(kwargs_handlers=...)``), reach the trainer's
`Accelerator` with the trainer's own `DistributedDataParallelKwargs`: a user's DDP
handler is used as given but for ``find_unused_parameters``, on when either it or
``ddp_find_unused_parameters`` turns it on. Before: no way to pass one (the trainer
built its Accelerator with its DDP handler alone). Real Accelerators, on the CPU."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from accelerate.utils import (
    DistributedDataParallelKwargs,
    GradScalerKwargs,
    InitProcessGroupKwargs,
)

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.trainer.setup import make_accelerator, merged_handlers
from tests.helpers import linear_samples, small_model, xy


def arguments(tmp_path: Path, find_unused: bool = False) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=4, buffer="fifo", buffer_size=32,
        report_to="none", disable_progress_bar=True, ddp_find_unused_parameters=find_unused,
    )  # fmt: skip


def test_the_trainer_passes_a_users_handlers_to_its_accelerator(tmp_path: Path) -> None:
    timeout = InitProcessGroupKwargs(timeout=timedelta(seconds=77))
    scaler = GradScalerKwargs(init_scale=1024.0)
    model = small_model()
    trainer = OnlineTrainer(
        model, arguments(tmp_path), torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=list(linear_samples(8)), process_sample=xy,
        kwargs_handlers=[timeout, scaler],
    )  # fmt: skip
    acc = trainer.accelerator
    assert acc.init_handler is timeout and acc.scaler_handler is scaler
    assert acc.ddp_handler is not None and acc.ddp_handler.find_unused_parameters is False
    assert trainer.train().global_step == 2  # trains as before


EITHER = [(False, False, False), (True, False, True), (False, True, True), (True, True, True)]


@pytest.mark.parametrize(("flag", "theirs", "used"), EITHER)
def test_a_users_ddp_handler_is_used_with_find_unused_on_when_either_asks(
    tmp_path: Path, flag: bool, theirs: bool, used: bool
) -> None:
    given = DistributedDataParallelKwargs(bucket_cap_mb=7, find_unused_parameters=theirs)
    acc = make_accelerator(arguments(tmp_path, find_unused=flag), [given])
    assert acc.ddp_handler is not None
    assert acc.ddp_handler.bucket_cap_mb == 7
    assert acc.ddp_handler.find_unused_parameters is used
    assert given.find_unused_parameters is theirs  # a copy changed, never the user's


def test_without_handlers_the_trainers_own_is_there(tmp_path: Path) -> None:
    acc = make_accelerator(arguments(tmp_path, find_unused=True))
    assert acc.ddp_handler is not None and acc.ddp_handler.find_unused_parameters is True


def test_two_of_one_class_are_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="two DistributedDataParallelKwargs handlers: give one of each kind"
    ):
        merged_handlers(
            arguments(tmp_path),
            [DistributedDataParallelKwargs(), DistributedDataParallelKwargs(bucket_cap_mb=7)],
        )


def test_what_is_not_a_handler_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"kwargs_handlers: \{'timeout': 60\} is not an"):
        merged_handlers(arguments(tmp_path), [{"timeout": 60}])  # type: ignore[list-item]


def test_a_timeout_for_a_group_formed_already_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """(A group formed before the trainer keeps its settings: the handler is not
    silently dropped.)"""
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.trainer.setup"):
        merged_handlers(arguments(tmp_path), [InitProcessGroupKwargs(timeout=timedelta(1))])
    assert "is not applied: this process's process group was formed before" in caplog.text


def test_one_handler_not_in_a_list_is_refused_saying_to_pass_a_list(tmp_path: Path) -> None:
    """(As `Accelerator(kwargs_handlers=...)` requires a list. Before: "'InitProcessGroupKwargs'
    object is not iterable".)"""
    one = InitProcessGroupKwargs(timeout=timedelta(seconds=30))
    with pytest.raises(
        TypeError, match=r"got one handler.*pass kwargs_handlers=\[InitProcessGroupKwargs"
    ):
        merged_handlers(arguments(tmp_path), one)  # type: ignore[arg-type]


@dataclass
class MyTimeout(InitProcessGroupKwargs):
    pass


def test_a_subclass_with_its_base_class_is_refused_naming_both(tmp_path: Path) -> None:
    """(Two handlers of one kind. Before: a raw KeyError from Accelerate.)"""
    given = [MyTimeout(timeout=timedelta(seconds=30)), InitProcessGroupKwargs()]
    with pytest.raises(
        ValueError,
        match=r"two InitProcessGroupKwargs handlers \(InitProcessGroupKwargs and MyTimeout\)",
    ):
        merged_handlers(arguments(tmp_path), given)


def test_a_subclass_alone_is_refused_naming_the_class_to_give(tmp_path: Path) -> None:
    """(Accelerate looks handlers up by exact class. Before: a raw KeyError.)"""
    with pytest.raises(TypeError, match="MyTimeout subclasses InitProcessGroupKwargs: .*give "):
        merged_handlers(arguments(tmp_path), [MyTimeout(timeout=timedelta(seconds=30))])
