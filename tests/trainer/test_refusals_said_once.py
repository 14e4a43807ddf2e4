"""`refusals_end_the_program` keeps its two promises for the checkpoint's refusals:
said by rank 0 only, and only before training starts (review of 2026-12-01).

* A resume with no checkpoint that verifies raised a plain `CheckpointError` on every
  rank (`resume_choice.resolve_resume`): two ranks printed two ``error:`` lines. A
  load's failure (`checkpointing.load_checkpoint`): rank 0 said its own (a study's
  `StudyChanged`) and every other rank a loud "another rank could not load". Now each
  is said once, by rank 0 (with a failed rank's text when rank 0 loaded), the other
  ranks raising quiet copies (`common.refusal.elsewhere`).
* A save whose checkpoint a hook's on_save spoiled, mid-training, is a `CheckpointError`
  too: it was ended as a refusal (one line, status 2, no traceback); it is a bug to
  trace and now propagates (`refusals.in_training`'s mark).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from process_tree import run_group

from melissa_trainer import (
    CheckpointError,
    Hook,
    OnlineTrainer,
    TrainingArguments,
    refusals_end_the_program,
)
from melissa_trainer.common.refusal import SaidOnRankZero
from melissa_trainer.launcher.study_change import StudyChanged
from melissa_trainer.trainer import checkpointing, refusals

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "user_train_refusals.py"
FLAGS = ["--disable_progress_bar", "--report_to", "none", "--batch_size", "4"]


def simulations(rank: int, world_size: int) -> Iterator[dict[str, np.ndarray]]:
    for sim in range(rank, 8, world_size):
        for step in range(4):
            yield {"x": np.full(3, sim + step, np.float32), "y": np.zeros(1, np.float32)}


def process_sample(s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(s["x"]), torch.from_numpy(s["y"])


class SpoilsTheModel(Hook):
    """Exports the weights under the trainer's own name, other bytes: the save fails."""

    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        model = Path(path) / "model.safetensors"
        model.write_bytes(model.read_bytes() + b" ")


@pytest.mark.timeout(120)
def test_a_checkpoint_spoiled_mid_training_propagates_with_its_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=4, save_steps=1, batch_size=4,
        report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    model = torch.nn.Linear(3, 1)
    spoiled = pytest.raises(CheckpointError, match="no longer verifies")
    with spoiled as failed, refusals_end_the_program():
        trainer = OnlineTrainer(
            model, args, torch.optim.SGD(model.parameters(), 0.01),
            train_source=simulations, process_sample=process_sample,
            hooks=[SpoilsTheModel()],
        )  # fmt: skip
        trainer.train()
    assert trainer.state.global_step == 1  # (the first save raised: in training)
    assert any(entry.name == "_after_hooks" for entry in failed.traceback)
    assert ": error: " not in capsys.readouterr().err


def fake_trainer(rank: int) -> Any:
    """What `load_checkpoint` reads of a trainer, as rank `rank` of two."""
    model = torch.nn.Linear(3, 1)
    return SimpleNamespace(
        process_index=rank, is_main_process=rank == 0, lr_scheduler=None,
        optimizer=torch.optim.SGD(model.parameters(), 0.01),
    )  # fmt: skip


def load_on(
    rank: int,
    errors: list[Exception | None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[BaseException, str]:
    """`load_checkpoint` on rank `rank` of two whose loads raise `errors` (rank order),
    the all-gather played from them; what it raises, and what the wrapper says of it
    (its stderr; the wrapper's exit status checked: 2)."""

    def load(trainer: Any, path: Path) -> None:
        if errors[rank] is not None:
            raise errors[rank]  # type: ignore[misc]

    monkeypatch.setattr(checkpointing.registry, "load", load)
    # no launcher's store here: a quiet rank would wait the grace blind (15 s a call);
    # how long a quiet rank waits is test_refusal_quiet_rank_ends.py's subject, not this
    monkeypatch.setattr(refusals, "QUIET_RANK_GRACE", 0.0)
    reports = [str(e) if e is not None else None for e in errors]
    monkeypatch.setattr(checkpointing, "agree", lambda trainer, report, at: reports)
    path = Path("/tmp/out/checkpoints/checkpoint-4")
    with pytest.raises(BaseException) as raised:
        checkpointing.load_checkpoint(fake_trainer(rank), path)
    with pytest.raises(SystemExit) as ended, refusals_end_the_program():
        raise raised.value
    assert ended.value.code == 2
    return raised.value, capsys.readouterr().err


def test_a_study_change_on_rank_0_is_said_by_rank_0_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = StudyChanged("the sampler changed: resume with the same sampler")
    error, said = load_on(0, [changed, None], monkeypatch, capsys)
    assert error is changed and said.count(": error: ") == 1, said
    assert "the sampler changed" in said
    error, said = load_on(1, [changed, None], monkeypatch, capsys)
    assert isinstance(error, CheckpointError) and isinstance(error, SaidOnRankZero)
    assert said == ""


def test_only_another_ranks_failure_is_said_by_rank_0_with_its_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = CheckpointError("rank_1/buffer.safetensors: truncated", Path("/x"))
    error, said = load_on(0, [None, broken], monkeypatch, capsys)
    assert said.count(": error: ") == 1, said
    assert "rank 1 could not load" in said and "rank_1/buffer.safetensors: truncated" in said
    error, said = load_on(1, [None, broken], monkeypatch, capsys)
    assert isinstance(error, SaidOnRankZero) and said == ""
    # the same error on both ranks: rank 0's, said once
    error, said = load_on(1, [broken, broken], monkeypatch, capsys)
    assert isinstance(error, SaidOnRankZero) and said == ""


def test_another_ranks_own_error_of_another_text_is_raised_as_it_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not hidden behind rank 0's line: it says something rank 0 did not."""
    first = CheckpointError("model.safetensors: truncated", Path("/x"))
    other = CheckpointError("rank_1/buffer.json: not JSON", Path("/x"))
    error, said = load_on(1, [first, other], monkeypatch, capsys)
    assert error is other and "rank_1/buffer.json: not JSON" in said


@pytest.mark.e2e
@pytest.mark.timeout(400)
def test_two_ranks_resuming_a_corrupt_checkpoint_say_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    """A checkpoint whose files are truncated (written by one process: cheaper, and a
    resume on two ranks verifies it as its own), ``--resume_from_checkpoint latest``
    on two ranks: one ``error:`` line (rank 0's), status 2. Two lines before."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from two_ranks import launch_two_ranks
    finally:
        sys.path.remove(str(Path(__file__).parent))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update({"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})
    first = run_group(
        [sys.executable, str(SCRIPT), "--output_dir", str(out), "--max_steps", "2", *FLAGS],
        timeout=150, env=env,
    )  # fmt: skip
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    (checkpoint,) = [p for p in (out / "checkpoints").iterdir() if p.is_dir()]
    for name in ("model.safetensors", "optimizer.bin"):
        (checkpoint / name).write_bytes((checkpoint / name).read_bytes()[:10])
    proc = launch_two_ranks(
        SCRIPT, "--output_dir", str(out), "--resume_from_checkpoint", "latest", *FLAGS,
        "--max_steps", "4", timeout=240,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    said = [line for line in output.splitlines() if "error:" in line]
    assert len(said) == 1, output[-4000:]
    assert said[0].startswith("user_train_refusals.py: error: resume_from_checkpoint='latest'")
    assert f"no checkpoint under {checkpoint.parent} verifies" in said[0], said[0]
    # no rank's traceback (torchrun's own, of ChildFailedError, follows: its summary)
    assert "[rank0]: Traceback" not in output and "[rank1]: Traceback" not in output
    assert "melissa_trainer/trainer/" not in output, output[-4000:]
    assert "exitcode  : 2" in output, output[-4000:]  # torchrun's summary: status 2
