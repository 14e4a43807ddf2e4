"""``trainer.log()``, ``trainer.evaluate()``, ``trainer.save_checkpoint()`` called by a
hook on rank 0 only, as Hugging Face users port ``if state.is_world_process_zero:
trainer.save_model()`` (here ``if trainer.is_main_process: trainer.save_checkpoint()``),
under two ranks (gloo on CPU, ``accelerate launch --multi_gpu --num_processes 2``).
Before, rank 0 alone entered the call's collectives while rank 1 went on to its next
step: rank 0 died of a SIGABRT in gloo ("Connection reset by peer"), rank 1 failed,
neither naming the call. Now the call is a request of the hook's flag
(`TrainerActions._hook_asks`), performed by every rank at the ranks' next agreement, as
``control.should_save = True`` set there is (tests/trainer/test_one_rank_requests.py).
Run as a script, this file is what each rank runs: each rank writes
``OUT/rank_<rank>.json``, the steps at which it logged, validated and saved."""

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

#: the call -> what every rank then does (no action of the schedule before the end:
#: logging_steps 100; the request made at step 5 rides the stop agreement started at
#: step 8, read and performed at step 12), and what the call returns on rank 0
CASES = {
    "save_checkpoint": ("save", [12], None),
    "log": ("log", [12, 16], {}),
    "evaluate": ("validate", [12, 16], {}),
    # every rank calling it there: the same request, performed once, at the same step
    "save_checkpoint_every_rank": ("save", [12], None),
}


class RankZeroCalls(Hook):
    """Calls `call` of the trainer on rank 0 only in on_step_end at step 5; records
    every rank's actions (the step of each log, validation and save)."""

    def __init__(self, call: str) -> None:
        self.call = call
        self.done: dict[str, Any] = {"log": [], "validate": [], "save": []}

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        every = self.call.endswith("_every_rank")
        if state.global_step == 5 and (trainer.is_main_process or every):
            self.done["returned"] = getattr(trainer, self.call.removesuffix("_every_rank"))()

    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        self.done["log"].append(state.global_step)

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        self.done["validate"].append(state.global_step)

    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        self.done["save"].append(state.global_step)


def main(out: str, call: str) -> None:
    args = TrainingArguments(
        output_dir=str(Path(out) / "run"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, max_steps=16, logging_steps=100, stop_sync_steps=4,
        report_to="none", disable_progress_bar=True, save_at_end=False, save_seconds=None,
    )  # fmt: skip
    model = small_model()
    hook = RankZeroCalls(call)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(400, seed=rank)),
        process_sample=xy, eval_dataset=list(linear_samples(11, seed=7)), hooks=[hook],
    )  # fmt: skip
    state = trainer.train()
    done = {**hook.done, "global_step": state.global_step}
    (Path(out) / f"rank_{trainer.process_index}.json").write_text(json.dumps(done))


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.parametrize("call", sorted(CASES))
def test_a_direct_call_in_a_hook_on_rank_zero_is_performed_by_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from two_ranks import launch_two_ranks

    done = launch_two_ranks(Path(__file__), str(tmp_path), call, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]  # (before: rank 0's SIGABRT in gloo)
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in (0, 1)]
    action, steps, returned = CASES[call]
    assert ranks[0].pop("returned") == returned, ranks
    if call.endswith("_every_rank"):
        assert ranks[1].pop("returned") == returned, ranks
    assert ranks[0] == ranks[1], ranks  # every rank, the same actions at the same steps
    assert ranks[0][action] == steps and ranks[0]["global_step"] == 16, ranks
    # said once, naming the call, the hook and the flag it became
    flag = {"save": "should_save", "log": "should_log", "validate": "should_validate"}[action]
    name = call.removesuffix("_every_rank")
    words = f"trainer.{name}() called in a hook (RankZeroCalls.on_step_end) under 2 ranks"
    assert (
        said.count(words) == (2 if name != call else 1)
        and f"control.{flag} = True asks the same" in said
    ), said
    if action == "save":  # the checkpoint is there, written by both ranks together
        assert (tmp_path / "run" / "checkpoints" / "checkpoint-12").is_dir()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
