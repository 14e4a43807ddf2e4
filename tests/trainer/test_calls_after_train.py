"""``trainer.save_checkpoint()``, ``evaluate()``, ``log()`` called after `train()` returned,
under two ranks (gloo on CPU, ``accelerate launch --multi_gpu --num_processes 2``).
Before, ``if trainer.is_main_process: trainer.save_checkpoint()`` after `train()` had
rank 0 alone enter the save's collectives while rank 1 exited: rank 0 failed in gloo
("Connection closed by peer"), naming neither the call nor the fix. Now the call checks
in at the launcher's store first (`after_train.meet_after_train`): the rank that makes
it alone raises `AfterTrainError` naming the call, the other rank's exit and the fix;
ranks that call different things both raise; ranks that all call it save together, as
a hook's call does in a validation every rank makes after `train()`.
Run as a script, this file is what each rank runs: each writes ``OUT/rank_<rank>.json``,
what its call after `train()` returned or raised."""

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

#: the case -> the call each rank makes after train() (None: none, it exits)
CASES = {
    "rank_zero_alone": ("save_checkpoint", None),
    "every_rank": ("save_checkpoint", "save_checkpoint"),
    "different_calls": ("save_checkpoint", "evaluate"),
    # every rank validates after train(); a hook's on_validation_end saves there, on
    # every rank: at once (not a request of should_save, which no agreement would meet)
    "hook_saves_in_evaluate": ("evaluate", "evaluate"),
}


class SavesAfterTrain(Hook):
    """Calls trainer.save_checkpoint() in on_validation_end once train() has ended."""

    def __init__(self) -> None:
        self.saved: str | None = None

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        if trainer.train_ended:
            self.saved = str(trainer.save_checkpoint())


def main(out: str, case: str) -> None:
    args = TrainingArguments(
        output_dir=str(Path(out) / "run"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, max_steps=8, logging_steps=100, stop_sync_steps=4,
        report_to="none", disable_progress_bar=True, save_at_end=False, save_seconds=None,
    )  # fmt: skip
    model = small_model()
    hook = SavesAfterTrain()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(200, seed=rank)),
        process_sample=xy, eval_dataset=list(linear_samples(11, seed=7)), hooks=[hook],
    )  # fmt: skip
    trainer.train()
    call = CASES[case][trainer.process_index]
    done: dict[str, Any] = {"call": call}
    if call is not None:
        try:
            done["returned"] = str(getattr(trainer, call)())
        except AfterTrainError as exc:
            done["error"] = str(exc)
    done["hook_saved"] = hook.saved
    (Path(out) / f"rank_{trainer.process_index}.json").write_text(json.dumps(done))


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_call_after_train_is_made_by_every_rank_or_refused_naming_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from two_ranks import launch_two_ranks

    done = launch_two_ranks(Path(__file__), str(tmp_path), case, timeout=300)
    said = done.stdout + done.stderr
    # (before, rank_zero_alone: rank 0 failed in gloo, exit 1, nothing written)
    assert done.returncode == 0, said[-4000:]
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in (0, 1)]
    saved = tmp_path / "run" / "checkpoints" / "checkpoint-8"
    fix = "every rank must call alike (not under `if trainer.is_main_process:`)"
    if case == "hook_saves_in_evaluate":  # (before, 0852f0dc: None, kept as a request)
        assert ranks[0]["hook_saved"] == ranks[1]["hook_saved"] == str(saved), ranks
        assert saved.is_dir()
        return
    if case == "every_rank":
        assert ranks[0]["returned"] == ranks[1]["returned"] == str(saved), ranks
        assert saved.is_dir()
        return
    assert not saved.exists()  # refused before any collective, nothing written
    if case == "rank_zero_alone":
        error = ranks[0]["error"]
        assert "trainer.save_checkpoint() after train() on rank 0 of 2" in error, error
        assert "rank 1 exited without calling it" in error and fix in error, error
    else:
        first, second = ranks[0]["error"], ranks[1]["error"]
        assert "rank 1 called trainer.evaluate() there instead" in first, first
        assert "trainer.evaluate() after train() on rank 1 of 2" in second, second
        assert "rank 0 called trainer.save_checkpoint() there instead" in second, second


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
