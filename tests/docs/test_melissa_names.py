"""docs/how-to/configuration.md's "From a Melissa study" maps every Melissa key.

A Melissa (INRIA) user porting a study looks for their JSON's keys (`nb_batches_update`,
`per_server_watermark`, `checkpoint_interval`, `nb_clients`, ...): the docs named none of
them (htrial48: grep -r nb_batches_update docs/ found nothing, nor nb_clients,
per_server_watermark or checkpoint_interval). This test reads the section's table and
checks that each key of Melissa's `dl_config` and `study_options` that its deep-learning
server reads is in its left column, and that every name on the right exists: a
`TrainingArguments` field, a keyword of `Launcher`, `LauncherTuning`, `ReceiverConfig`,
`Client` or `OnlineTrainer`, a `make_sampler` kind.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import (
    Hook,
    Launcher,
    LauncherTuning,
    OnlineTrainer,
    ReceiverConfig,
    TrainingArguments,
)
from melissa_trainer.client import Client
from melissa_trainer.config.melissa_names import melissa_hint
from melissa_trainer.launcher.samplers import make_sampler

pytestmark = pytest.mark.timeout(60)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "configuration.md"
#: the keys Melissa's DeepMelissaServer reads from its config (dl_config, study_options)
MELISSA_KEYS = [
    "batch_size", "per_server_watermark", "buffer_size", "pseudo_epochs", "nb_batches_update",
    "checkpoint_interval", "buffer", "tensorboard", "convert_log_to_df",
    "nb_clients", "parameter_sweep_size", "job_limit", "nb_time_steps",
    "bind_simulation_to_server_rank",
]  # fmt: skip
CALLABLES = {
    "Launcher": Launcher,
    "LauncherTuning": LauncherTuning,
    "ReceiverConfig": ReceiverConfig,
    "Client": Client,
    "OnlineTrainer": OnlineTrainer,
}


def _arguments(owner: type) -> set[str]:
    """The keywords `owner(...)` takes: a dataclass's fields (ReceiverConfig's __new__
    hides them from inspect.signature), else its signature's."""
    if dataclasses.is_dataclass(owner):
        return {f.name for f in dataclasses.fields(owner)}
    return set(inspect.signature(owner).parameters)


def _rows() -> list[tuple[str, str]]:
    text = PAGE.read_text()
    assert "## From a Melissa study" in text, "the section is gone"
    section = text.split("## From a Melissa study", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 2 and not set(cells[0]) <= set("-") and cells[0] != "Melissa":
            rows.append((cells[0], cells[1]))
    return rows


def test_every_melissa_key_has_a_row() -> None:
    left = " ".join(melissa for melissa, _ in _rows())
    missing = [key for key in MELISSA_KEYS if not re.search(rf"`[\w.]*\b{key}`", left)]
    assert not missing, f"Melissa keys with no row in {PAGE.name}: {missing}"


def test_every_name_on_the_right_exists() -> None:
    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    wrong = []
    for melissa, here in _rows():
        for owner, name in re.findall(r"(\w+)\((\w+)=", here):
            if owner in CALLABLES and name not in _arguments(CALLABLES[owner]):
                wrong.append(f"{melissa}: {owner} has no argument {name!r}")
        first = re.match(r"`(\w+)`", here)
        if first and first.group(1) not in fields:
            wrong.append(f"{melissa}: {first.group(1)!r} is no TrainingArguments field")
    assert not wrong, "\n".join(wrong)


def test_the_sampler_kinds_and_buffer_spellings_named_are_taken() -> None:
    (sampler,) = [here for melissa, here in _rows() if "sampler" in melissa]
    for kind in re.findall(r'`"(\w+)"`', sampler):
        make_sampler(kind, {"a": (0.0, 1.0)})  # an unknown kind raises ValueError
    for melissa_spelling in ("FIFO", "FIRO", "Reservoir"):
        kwargs = {"buffer_size": 100}
        TrainingArguments(output_dir="unused", buffer=melissa_spelling, **kwargs)
    LauncherTuning(max_restarts=0, on_failure="raise")  # the row on fault tolerance


class _BatchCounter(Hook):
    """The batches (micro-batches) trained before each validation and each save."""

    def __init__(self) -> None:
        self.batches, self.validated, self.saved = 0, [], []

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        self.batches += 1

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        self.validated.append(self.batches)

    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        self.saved.append(self.batches)


def test_melissa_counts_with_gradient_accumulation(tmp_path: Path) -> None:
    """Melissa steps its optimizer once per batch, so its nb_batches_update and
    checkpoint_interval count batches; eval_steps and save_steps count optimizer steps,
    each gradient_accumulation_steps batches per rank. The hints assumed 1 (hmelissa2):
    the page's rule (divide by it too) is what a run does: Melissa's nb_batches_update 4
    and checkpoint_interval 4 on one rank, with 2 batches a step, are 2 steps."""
    for key in ("nb_batches_update", "checkpoint_interval"):
        assert "by gradient_accumulation_steps when above 1" in str(melissa_hint(key, True)), key
    (nb,) = [here for melissa, here in _rows() if "nb_batches_update" in melissa]
    (ck,) = [here for melissa, here in _rows() if "checkpoint_interval" in melissa]
    assert "`--eval_steps 25` with A = 2" in nb and "divide by A" in ck
    accumulation, melissa_interval, ranks = 2, 4, 1
    steps = melissa_interval // (ranks * accumulation)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=2,
        gradient_accumulation_steps=accumulation,
        buffer="fifo",
        eval_steps=steps,
        save_steps=steps,
        save_at_end=False,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(0)
    counter = _BatchCounter()
    OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=list(linear_samples(32)),
        eval_dataset=list(linear_samples(4, seed=1)),
        process_sample=xy,
        hooks=[counter],
    ).train()
    assert counter.validated == [4, 8, 12, 16] and counter.saved == [4, 8, 12, 16]
