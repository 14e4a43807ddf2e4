"""docs/reference/quick.md, the quick reference, says what the code does.

* the page is what `docs/reference/make_quick.py` renders from the code now (else:
  run the script);
* its events are `Event`'s, in the order a run fires them (a run that logs, validates,
  saves and reduces per-simulation losses at every step, with a pseudo-epoch);
* the figures, metrics and TensorBoard tags it names are those such a run writes (the
  trainer's and the buffer's), and its `source_*` names the receivers' and a study's
  telemetry keys;
* its `TrainingArguments` tables hold every field once, with the dataclass's default;
* its exit codes and sample fields are the code's.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.hooks import Event
from melissa_trainer.stream.ingest_counters import telemetry_keys
from melissa_trainer.study.study import LAUNCHER_KEYS
from melissa_trainer.trainer.preempted import exit_code
from melissa_trainer.wire.layout import RESERVED_NAMES

pytestmark = pytest.mark.timeout(120)

REFERENCE = Path(__file__).parents[2] / "docs" / "reference"
PAGE = REFERENCE / "quick.md"


def make_quick() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_quick", REFERENCE / "make_quick.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def section(title: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def first_cells(text: str) -> list[str]:
    """The first backquoted name of each table row of `text` (header rows left out)."""
    lines = [*text.splitlines(), ""]
    rows = [
        line
        for line, after in zip(lines, lines[1:], strict=False)
        if line.startswith("| ") and not after.startswith("|---")  # (a header: before it)
    ]
    names = [re.search(r"`([^`]+)`", row) for row in rows]
    return [m.group(1) for m in names if m is not None]


def column(text: str, index: int) -> list[str]:
    """The backquoted name in cell `index` of each table row of `text`."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if line.startswith("| `") and len(cells) > index:
            match = re.fullmatch(r"`([^`]+)`", cells[index])
            if match:
                out.append(match.group(1))
    return out


def test_the_page_is_what_the_script_makes_of_the_code() -> None:
    assert PAGE.read_text() == make_quick().render(), (
        "docs/reference/quick.md is stale: run python docs/reference/make_quick.py"
    )


def test_the_script_refuses_a_field_or_an_event_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    module = make_quick()
    groups = {k: [n for n in v if n != "seed"] for k, v in module.GROUPS.items()}
    monkeypatch.setattr(module, "GROUPS", groups)
    with pytest.raises(AssertionError, match="missing \\['seed'\\]"):
        module.arguments_section()
    monkeypatch.setattr(module, "WHEN", module.WHEN[1:])
    with pytest.raises(AssertionError, match="every Event once"):
        module.events_section()


# -- a run that fires every event but on_load and on_preempted, and logs every figure --


def samples(n: int) -> Iterator[dict[str, np.ndarray]]:
    for s in linear_samples(n, seed=2):
        i = int(s["index"])
        yield {**s, "simulation_id": np.asarray(i // 8, np.int64)}


class Events(Hook):
    """Records the events in the order they fire (every method overridden)."""

    def __init__(self) -> None:
        self.fired: list[str] = []


def _recorder(name: str) -> Any:
    def record(self: Events, trainer: Any, state: Any, control: Any, *payload: Any) -> None:
        self.fired.append(name)

    return record


for _event in Event:
    setattr(Events, _event.value, _recorder(_event.value))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[OnlineTrainer, Events, set[str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path_factory.mktemp("quick")
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        disable_progress_bar=True,
        logging_steps=1,
        eval_steps=1,
        save_steps=2,
        max_to_keep=1,
        simulation_loss_steps=1,
        max_grad_norm=1.0,
        stop_sync_steps=2,
        pseudo_epochs=2,
    )
    events = Events()
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=lambda rank, world: samples(32),
        process_sample=xy,
        eval_dataset=list(samples(16)),
        hooks=[events],
    )
    trainer.train()
    accumulator = EventAccumulator(str(out / "runs")).Reload()
    tags = accumulator.Tags()
    return trainer, events, {*tags["scalars"], *tags["histograms"]}


def test_the_events_are_in_the_order_a_run_fires_them(run: Any) -> None:
    _, events, _ = run
    page = first_cells(section("Hook events"))
    assert sorted(page) == sorted(e.value for e in Event)
    first_fired = list(dict.fromkeys(events.fired))
    assert first_fired == [e for e in page if e not in ("on_load", "on_preempted")]


def test_the_figures_and_tags_are_those_a_run_writes(run: Any) -> None:
    trainer, _, tags = run
    figures = section("Logged figures")
    keys = first_cells(figures)
    trainer_keys = [k for k in keys if not k.startswith("source_")]
    logs = [e for e in trainer.state.log_history if "loss" in e and "eval_loss" not in e]
    assert logs and [sorted(set(e) - {"step"}) for e in logs] == [sorted(trainer_keys)] * len(logs)
    page_tags = set(column(figures, 1)) | set(column(section("Validation metrics"), 1))
    page_tags = {t for t in page_tags if not t.startswith("source/")}
    assert tags == page_tags | {"buffer/reuse"}  # (no source/: this source has no telemetry)
    assert "`buffer/reuse`" in figures  # (a histogram, named in the text)
    metrics = first_cells(section("Validation metrics"))
    evals = [e for e in trainer.state.log_history if "eval_loss" in e]
    assert evals and all(set(e) - {"step"} == set(metrics) for e in evals)


def test_the_source_names_are_the_receivers_and_a_studys_telemetry_keys() -> None:
    figures = section("Logged figures")
    named = [k for k in first_cells(figures) if k.startswith("source_")]
    keys = set(telemetry_keys())
    reasons = {k.removeprefix("rejected_") for k in keys if k.startswith("rejected_")}
    expected = {f"source_{k}" for k in keys if not k.startswith("rejected_")}
    expected |= {"source_rejected_<name>", "source_launcher_<name>"}
    assert set(named) == expected
    row = next(line for line in figures.splitlines() if "`source_rejected_<name>`" in line)
    assert set(re.findall(r"`(\w+)`", row.split(" | ")[-1])) == reasons
    row = next(line for line in figures.splitlines() if "`source_launcher_<name>`" in line)
    assert set(re.findall(r"`(\w+)`", row.split(" | ")[-1])) == set(LAUNCHER_KEYS)


def test_every_field_once_with_its_default() -> None:
    text = section("`TrainingArguments`, by purpose")
    names, defaults = column(text, 0), column(text, 1)
    fields = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
    assert sorted(names) == sorted(fields)
    assert dict(zip(names, defaults, strict=True)) == {k: repr(v) for k, v in fields.items()}


def test_the_exit_codes_and_sample_fields_are_the_codes() -> None:
    codes = section("Exit codes")
    assert exit_code(signal.SIGTERM) == 143 and exit_code(signal.SIGINT) == 130
    assert "143 SIGTERM, 130 SIGINT" in codes and "| 128 + signal |" in codes
    sample = section("What a sample and a batch hold")
    for name in RESERVED_NAMES:
        assert f"`{name}`" in sample
