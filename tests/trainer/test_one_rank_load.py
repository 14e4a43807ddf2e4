"""``trainer.load_checkpoint()`` called on one rank under two ranks (gloo on CPU,
``accelerate launch --multi_gpu --num_processes 2``), in a hook during `train()` or
after it returned. The load is collective (its error agreement is an all-gather), so a
call on rank 0 alone entered a collective rank 1 never made. Now: after `train()` the
load checks in at the launcher's store as log/evaluate/save_checkpoint do
(`after_train.meet_after_train`): alone, it raises `AfterTrainError` naming the call and
the fix, before loading anything; made by every rank, it loads on every rank alike. In a
hook during `train()` under several ranks it is refused with a `RuntimeError` naming the
call and the fix (no agreement can make every rank load at the same step).
Run as a script, this file is what each rank runs: each writes ``OUT/rank_<rank>.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.trainer.after_train import AfterTrainError  # noqa: E402

CASES = ("after_train_alone", "after_train_every_rank", "hook_alone")


class LoadsInHook(Hook):
    """On rank 0 alone, loads the step-4 checkpoint at step 6 (``hook_alone``)."""

    def __init__(self, case: str, checkpoint: Path) -> None:
        self.case, self.checkpoint = case, checkpoint

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if self.case == "hook_alone" and state.global_step == 6 and trainer.is_main_process:
            trainer.load_checkpoint(self.checkpoint)


def main(out: str, case: str) -> None:
    run = Path(out) / "run"
    args = TrainingArguments(
        output_dir=str(run), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, max_steps=8, logging_steps=100, stop_sync_steps=4, save_steps=4,
        report_to="none", disable_progress_bar=True, save_at_end=True, save_seconds=None,
    )  # fmt: skip
    model = small_model()
    checkpoint = run / "checkpoints" / "checkpoint-4"
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(200, seed=rank)),
        process_sample=xy, hooks=[LoadsInHook(case, checkpoint)],
    )  # fmt: skip
    rank = trainer.process_index
    done: dict[str, Any] = {}
    try:
        trainer.train()
    except RuntimeError as exc:
        done["train_error"] = str(exc)
    if case != "hook_alone" and (case == "after_train_every_rank" or rank == 0):
        try:
            trainer.load_checkpoint(checkpoint)
            done["loaded_step"] = trainer.state.global_step
        except AfterTrainError as exc:
            done["error"] = str(exc)
    done["step"] = trainer.state.global_step
    done["weights"] = [p.detach().flatten().tolist() for p in trainer.model.parameters()]
    (Path(out) / f"rank_{rank}.json").write_text(json.dumps(done))


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.parametrize("case", CASES)
def test_load_checkpoint_on_one_rank_is_refused_naming_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from two_ranks import launch_two_ranks

    done = launch_two_ranks(Path(__file__), str(tmp_path), case, timeout=300)
    said = done.stdout + done.stderr
    fix = "every rank must call alike (not under `if trainer.is_main_process:`)"
    if case == "hook_alone":
        # (the run fails on rank 0's refusal; the words reach the user)
        assert "trainer.load_checkpoint() called in a hook" in said, said[-4000:]
        assert "under 2 ranks during train()" in said, said[-4000:]
        return
    assert done.returncode == 0, said[-4000:]
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in (0, 1)]
    if case == "after_train_every_rank":
        assert ranks[0]["loaded_step"] == ranks[1]["loaded_step"] == 4, ranks
        assert ranks[0]["weights"] == ranks[1]["weights"]
        return
    error = ranks[0]["error"]
    assert "trainer.load_checkpoint() after train() on rank 0 of 2" in error, error
    assert "rank 1 exited without calling it" in error and fix in error, error
    assert ranks[0]["step"] == 8, ranks  # refused before anything was loaded


class LoadsOnce(Hook):
    """Loads `checkpoint` at the first end of step 6; records the steps it sees."""

    def __init__(self, checkpoint: Path) -> None:
        self.checkpoint, self.seen = checkpoint, list[Any]()

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.seen.append(state.global_step)
        if state.global_step == 6 and self.seen.count(6) == 1:
            trainer.load_checkpoint(self.checkpoint)
            self.seen.append(("loaded", trainer.state.global_step))


@pytest.mark.timeout(60)
def test_a_hook_s_load_under_one_process_is_as_before(tmp_path: Path) -> None:
    """The refusal is for several ranks only: under one process a hook's load is made at
    once, as before (hooks.md), and training goes on from the loaded step."""
    run = tmp_path / "run"
    args = TrainingArguments(
        output_dir=str(run), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        max_steps=8, logging_steps=100, save_steps=4, report_to="none",
        disable_progress_bar=True, save_at_end=True, save_seconds=None,
    )  # fmt: skip
    model = small_model()
    hook = LoadsOnce(run / "checkpoints" / "checkpoint-4")
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(200, seed=rank)),
        process_sample=xy, hooks=[hook],
    )  # fmt: skip
    state = trainer.train()
    assert hook.seen == [1, 2, 3, 4, 5, 6, ("loaded", 4), 5, 6, 7, 8], hook.seen
    assert state.global_step == 8


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
