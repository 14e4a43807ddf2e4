"""A checkpoint written by an earlier version resumes on this code.

`tests/data/checkpoint_v1` was written by `tests/data/make_old_checkpoint.py` with the
code before checkpoints were versioned (a registry of named parts): a study of 4
simulations stopped at step 12 with simulation 0 finished, 1 and 2 half trained on
and 3 not drawn yet. The oracles are independent of the loading code: the step and
the sample counts read from the checkpoint's JSON files, the weights from its
``model.safetensors`` (read by safetensors), and the study's exactly-once contract
(every step of every simulation trained on once, over the two runs).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import Keys
from safetensors.torch import load_file

from melissa_trainer.common import migrations
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.simulation_record import SimulationRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from make_old_checkpoint import SIMULATIONS, STEPS, build_trainer  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "checkpoint_v1"
#: what the first run trained on (make_old_checkpoint's assertion)
FIRST_KEYS = [(0, t) for t in range(STEPS)] + [(s, t) for s in (1, 2) for t in range(STEPS // 2)]


@pytest.fixture
def old_checkpoint(tmp_path: Path) -> Path:
    """A copy of the fixture (the resumed run must not write into the repository)."""
    copy = tmp_path / "checkpoint-12"
    shutil.copytree(FIXTURE, copy)
    return copy


def _saved_weights() -> dict[str, torch.Tensor]:
    return load_file(str(FIXTURE / "model.safetensors"))


@pytest.mark.timeout(120)
def test_old_checkpoint_loads_step_counts_and_weights(old_checkpoint: Path, tmp_path: Path) -> None:
    saved_state = json.loads((FIXTURE / "trainer_state.json").read_text())
    saved_rank = json.loads((FIXTURE / "rank_0" / "trainer_rank.json").read_text())
    trainer = build_trainer(tmp_path, Keys(), max_steps=30)
    trainer.load_checkpoint(old_checkpoint)
    assert trainer.state.global_step == saved_state["global_step"] == 12
    assert trainer.state.samples_seen == saved_rank["samples_seen"] == 12
    assert trainer.state.total_samples_seen == saved_state["total_samples_seen"] == 12
    assert trainer.state.max_steps == 30  # the new run's limit wins
    weights = _saved_weights()
    model = trainer.accelerator.unwrap_model(trainer.model)
    assert set(weights) == set(model.state_dict())
    for name, value in model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    # the launcher's records (applied when the study starts): 0 to 2 drawn, 3 not yet
    saved_source = json.loads((FIXTURE / "rank_0" / "source.json").read_text())
    assert trainer.source.state_dict() == saved_source
    assert saved_source["launcher"]["next_id"] == 3
    losses = trainer.simulation_losses.state_dict()
    saved_losses = load_file(str(FIXTURE / "rank_0" / "simulation_losses.safetensors"))
    assert set(losses) == set(saved_losses)
    for name, value in losses.items():
        assert torch.equal(torch.as_tensor(value), saved_losses[name]), name


class ReadCounts:
    """How often a resume migrates the launcher's record (`migrations.upgrade` of
    "launcher", wherever a module bound it) and builds its simulations' records
    (`SimulationRecord`s made), as they stand when the launcher starts (before it draws
    any new simulation)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.migrations = self.records = 0
        self.at_start: tuple[int, int] | None = None
        original = migrations.upgrade

        def upgrade(record: str, *args: Any, **kwargs: Any) -> Any:
            self.migrations += record == "launcher"
            return original(record, *args, **kwargs)

        for module in list(sys.modules.values()):
            name = getattr(module, "__name__", "")
            if name.startswith("melissa_trainer") and getattr(module, "upgrade", None) is original:
                monkeypatch.setattr(module, "upgrade", upgrade)
        init = SimulationRecord.__init__

        def made(record: SimulationRecord, *args: Any, **kwargs: Any) -> None:
            self.records += 1
            init(record, *args, **kwargs)

        monkeypatch.setattr(SimulationRecord, "__init__", made)
        start = Launcher.start

        def started(launcher: Launcher, *args: Any, **kwargs: Any) -> None:
            self.at_start = (self.migrations, self.records)
            start(launcher, *args, **kwargs)

        monkeypatch.setattr(Launcher, "start", started)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_old_checkpoint_resumes_and_finishes_the_study(
    old_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = Keys()
    trainer = build_trainer(tmp_path, keys, resume_from_checkpoint=str(old_checkpoint))
    counts = ReadCounts(monkeypatch)
    trainer.train()
    # the launcher's record was migrated once and its 3 simulations built once (checked
    # when the trainer loaded the checkpoint, applied when the study started)
    saved = json.loads((FIXTURE / "rank_0" / "source.json").read_text())["launcher"]
    assert counts.at_start == (1, len(saved["simulations"]["ids"])) == (1, 3)
    # each step of each simulation trained on exactly once, over the two runs
    lineage = Counter(FIRST_KEYS + keys.seen)
    assert lineage == Counter({(s, t): 1 for s in range(SIMULATIONS) for t in range(STEPS)})
    total = SIMULATIONS * STEPS
    assert trainer.state.global_step == total  # batch 1: one step per sample
    assert trainer.state.samples_seen == trainer.state.total_samples_seen == total
    summary = trainer.source.launcher.summary()  # type: ignore[attr-defined]
    assert (summary["finished"], summary["failed"]) == (SIMULATIONS, 0)
    model = trainer.accelerator.unwrap_model(trainer.model)
    assert any(not torch.equal(v, _saved_weights()[k]) for k, v in model.state_dict().items())
