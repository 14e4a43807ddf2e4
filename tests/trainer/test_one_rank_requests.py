"""A log, a validation or a save that a hook asks for on rank 0 only, as Hugging Face
users write it (``if state.is_world_process_zero: control.should_save = True``; here
``if trainer.is_main_process:``), under two ranks (gloo on CPU, ``accelerate launch
--multi_gpu --num_processes 2``). Before, rank 0 alone entered the action's collectives
while rank 1 went on to its next step, and the run died in gloo ("Received data size
doesn't match expected size"), naming neither the hook nor the request. Now a hook's
request waits for the ranks' agreement (`TrainerControl.defer`): it rides the loss
check that opens the next action point of the schedule (a log every `logging_steps`)
or the stop agreement read at the next window's end, and every rank performs it there,
at the same step. Run as a script, this file is what each rank runs: each rank writes
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

WINDOW, STEPS = 4, 16
#: each case: (the step at which rank 0 asks, the flag, the event it asks in, the
#: schedule's logging_steps), and what every rank then does (the action, at which steps)
CASES = {
    # no action of the schedule until the end (logging_steps 100): the stop agreements.
    # The agreement on window k+1 starts as window k begins (`windows`), so a request
    # in window 5-8 rides the one started at step 8 and is read, performed, at step 12
    "save_at_step_end": ((5, "should_save", "on_step_end", 100), ("save", [12])),
    # the first aligned window's agreement (started at step 4, after steps 2-4) is read
    # at once: performed at 4, then the end's log
    "log_at_step_end": ((2, "should_log", "on_step_end", 100), ("log", [4, 16])),
    # the same agreement; then the end's validation (an eval_dataset, no eval_steps)
    "validate_at_step_end": ((5, "should_validate", "on_step_end", 100), ("validate", [12, 16])),
    # logging_steps 6: the schedule's next action point carries it (its loss check)
    "save_before_a_log": ((5, "should_save", "on_step_end", 6), ("save", [6])),
    "save_where_the_schedule_logs": ((6, "should_save", "on_step_end", 6), ("save", [6])),
    # in on_log (Hugging Face's place for it): the next meeting; no agreement starts
    # after step 12 (the last window), so the end's action point
    "save_in_on_log": ((12, "should_save", "on_log", 6), ("save", [16])),
    # in a validation of the schedule (eval_steps 6: `EVAL`): the agreement that follows
    # every validation, so the validated model is the one saved (before: at the end, 16)
    "save_in_on_validation_end": ((12, "should_save", "on_validation_end", 100), ("save", [12])),
    # in the end's validation: the end's second agreement (`_perform_final_actions`)
    "save_in_the_end_s_validation": ((16, "should_save", "on_validation_end", 100), ("save", [16])),
    # at a pseudo-epoch's end (every rank there): its action point agrees. Each rank's
    # stream holds 40 samples (5 steps), then replayed once (`PSEUDO`)
    "save_at_pseudo_epoch_end": ((5, "should_save", "on_pseudo_epoch_end", 100), ("save", [5])),
}
#: the cases of a short stream replayed (pseudo_epochs 2, no max_steps)
PSEUDO = {"save_at_pseudo_epoch_end"}
#: the cases that validate every 6 steps (eval_steps)
EVAL = {"save_in_on_validation_end"}


class RankZeroAsks(Hook):
    """Asks for `flag` on rank 0 only, in `event` at `step`; records every rank's
    actions (the step of each log, validation and save)."""

    def __init__(self, step: int, flag: str, event: str) -> None:
        self.step, self.flag, self.event = step, flag, event
        self.done: dict[str, list[int]] = {"log": [], "validate": [], "save": []}

    def _ask(self, trainer: Any, state: Any, control: Any, event: str) -> None:
        if event == self.event and state.global_step == self.step and trainer.is_main_process:
            setattr(control, self.flag, True)

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self._ask(trainer, state, control, "on_step_end")

    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        self.done["log"].append(state.global_step)
        self._ask(trainer, state, control, "on_log")

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        self.done["validate"].append(state.global_step)
        self._ask(trainer, state, control, "on_validation_end")

    def on_pseudo_epoch_end(self, trainer: Any, state: Any, control: Any) -> None:
        self._ask(trainer, state, control, "on_pseudo_epoch_end")

    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        self.done["save"].append(state.global_step)


def main(out: str, case: str) -> None:
    (step, flag, event, logging_steps), _ = CASES[case]
    args = TrainingArguments(
        output_dir=str(Path(out) / "run"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, max_steps=None if case in PSEUDO else STEPS,
        pseudo_epochs=2 if case in PSEUDO else 1,
        logging_steps=logging_steps, stop_sync_steps=WINDOW,
        eval_steps=6 if case in EVAL else None,
        report_to="none", disable_progress_bar=True, save_at_end=False, save_seconds=None,
    )  # fmt: skip
    model = small_model()
    hook = RankZeroAsks(step, flag, event)
    samples = 40 if case in PSEUDO else 400  # (per rank)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(samples, seed=rank)),
        process_sample=xy, eval_dataset=list(linear_samples(11, seed=7)), hooks=[hook],
    )  # fmt: skip
    state = trainer.train()
    done = {**hook.done, "global_step": state.global_step}
    (Path(out) / f"rank_{trainer.process_index}.json").write_text(json.dumps(done))


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_request_on_rank_zero_alone_is_performed_by_every_rank_at_one_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from two_ranks import launch_two_ranks

    done = launch_two_ranks(Path(__file__), str(tmp_path), case, timeout=300)
    said = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, said  # (before: gloo's "Received data size doesn't match")
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1], ranks  # every rank, the same actions at the same steps
    action, steps = CASES[case][1]
    assert ranks[0][action] == steps, ranks
    if case in PSEUDO:  # (each rank's 5 steps, then their replay)
        assert ranks[0]["global_step"] == 10, ranks
    else:
        assert ranks[0]["global_step"] == STEPS
    if action == "save":  # the checkpoint is there, written by both ranks together
        assert (tmp_path / "run" / "checkpoints" / f"checkpoint-{steps[0]}").is_dir()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
