"""When hooks' requests are acted on: the final log, validation and save before on_train_end,
requests made too late warned about, a flag set in any event honoured at the next action
point, a stop at the end of the stream, and the cadence resumed from the trainer state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy
from hook_training import train

from melissa_trainer import (
    Event,
    Hook,
    OnlineTrainer,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

pytestmark = pytest.mark.timeout(60)


class EndOrder(Hook):
    """Records the events from the last step on, with their step."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append(f"step_end@{state.global_step}")

    def on_log(self, trainer: Any, state: TrainerState, control: TrainerControl, logs: Any) -> None:
        self.events.append(f"log@{state.global_step}")

    def on_validation_end(
        self, trainer: Any, state: TrainerState, control: TrainerControl, metrics: Any
    ) -> None:
        self.events.append(f"validation_end@{state.global_step}")

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        self.events.append(f"save@{state.global_step}")

    def on_loop_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append(f"loop_end@{state.global_step}")

    def on_train_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append(f"train_end@{state.global_step}")


def test_on_train_end_comes_after_the_final_log_validation_and_save(tmp_path: Path) -> None:
    """The built-in hooks request the final log, validation and save; a hook that saves
    results in on_train_end must see them done."""
    hook = EndOrder()
    validation = list(linear_samples(16, seed=5))
    # 7 steps: logging_steps 5 and eval_steps 4 do not fall on the last one
    train(tmp_path, n=56, hooks=[hook], eval_dataset=validation, eval_steps=4,
          save_at_end=True, report_to="none", disable_progress_bar=True)  # fmt: skip
    assert hook.events[-6:] == [
        "step_end@7", "loop_end@7", "log@7", "validation_end@7", "save@7", "train_end@7",
    ]  # fmt: skip


def test_requests_made_in_on_train_end_are_ignored_with_a_warning(
    tmp_path: Path, caplog: Any
) -> None:
    class LateSave(Hook):
        def on_train_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
            control.should_save = True

    trainer = train(tmp_path, n=40, hooks=[LateSave()], report_to="none", disable_progress_bar=True)
    assert not (Path(trainer.args.output_dir) / "checkpoints").exists()
    assert "should_save after the last action point" in caplog.text
    assert "on_loop_end" in caplog.text


def test_a_request_made_by_the_final_save_is_warned_about(tmp_path: Path, caplog: Any) -> None:
    class LogAfterSave(Hook):
        def on_save(
            self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
        ) -> None:
            control.should_log = True
            control.should_rewind = True

    train(tmp_path, n=40, hooks=[LogAfterSave()], save_at_end=True, report_to="none",
          disable_progress_bar=True)  # fmt: skip
    assert "should_log and should_rewind after the last action point" in caplog.text


# -- a flag set in any event is honoured at the next action point ------------------------

#: the action each flag asks for, as `ActionLog` records it
ACTIONS = {"should_log": "log", "should_validate": "validate", "should_save": "save"}
#: what makes the trainer fire the events that only come with an action
CAUSE = {
    Event.LOG: "should_log",
    Event.VALIDATION_START: "should_validate",
    Event.VALIDATION_END: "should_validate",
    Event.SAVE: "should_save",
}


class ActionLog(Hook):
    """Records the actions performed; `cause` requests one at step 2 (once)."""

    def __init__(self, cause: str | None) -> None:
        self.cause = cause
        self.events: list[str] = []

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if self.cause and state.global_step == 2:
            setattr(control, self.cause, True)

    def on_log(self, trainer: Any, state: TrainerState, control: TrainerControl, logs: Any) -> None:
        self.events.append("log")

    def on_validation_end(
        self, trainer: Any, state: TrainerState, control: TrainerControl, metrics: Any
    ) -> None:
        self.events.append("validate")

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        self.events.append("save")


def requester(event: Event, flag: str, record: list[str]) -> Hook:
    """A hook that sets `flag` the first time `event` fires, and notes it in `record`."""

    def request(self: Hook, trainer: Any, state: TrainerState, control: Any, *payload: Any) -> None:
        if "request" not in record:
            record.append("request")
            setattr(control, flag, True)

    return type("Requester", (Hook,), {event.value: request})()


@pytest.mark.parametrize("flag", sorted(ACTIONS))
@pytest.mark.parametrize(
    "event",
    [e for e in Event if e not in (Event.LOAD, Event.PREEMPTED, Event.TRAIN_END)],
    ids=lambda e: e.value,
)
def test_a_flag_set_in_any_event_is_honoured(tmp_path: Path, event: Event, flag: str) -> None:
    from melissa_trainer import PseudoEpochHook

    log = ActionLog(CAUSE.get(event))
    hooks = [log, PseudoEpochHook(2), requester(event, flag, log.events)]
    # SIMULATION_LOSSES fires when per-simulation losses are tracked: samples with ids
    tracked = event is Event.SIMULATION_LOSSES
    data = [dict(s, simulation_id=np.array(i % 3)) if tracked else s
            for i, s in enumerate(linear_samples(40))]  # fmt: skip
    args = TrainingArguments(output_dir=str(tmp_path / "out"), batch_size=8, buffer_size=64,
                             buffer="fifo", pseudo_epochs=2, stop_sync_steps=2,
                             simulation_loss_steps=2 if tracked else None,
                             report_to="none")  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
                            train_source=data, process_sample=xy,
                            eval_dataset=list(linear_samples(8, seed=5)), hooks=hooks,
                            use_default_hooks=False)  # fmt: skip
    trainer.train()  # 5 steps of the stream, then 5 of its replay
    assert "request" in log.events, "the event never fired"
    after = log.events[log.events.index("request") + 1 :]
    assert ACTIONS[flag] in after, log.events


def test_a_save_requested_in_on_load_is_honoured(tmp_path: Path) -> None:
    train(tmp_path, max_steps=3, save_at_end=True)
    log = ActionLog(None)
    resumed = train(tmp_path, max_steps=5, resume_from_checkpoint="latest", use_default_hooks=False,
                    hooks=[log, requester(Event.LOAD, "should_save", log.events)])  # fmt: skip
    assert log.events == ["request", "save"]
    assert resumed.state.last_save_step == 4  # the first action point: after step 4


def test_a_stop_requested_at_the_end_of_the_stream_stops_before_the_replay(tmp_path: Path) -> None:
    from melissa_trainer import PseudoEpochHook

    class StopAtEnd(Hook):
        def on_end_of_stream(self, trainer: Any, state: TrainerState, control: Any) -> None:
            control.should_stop = True

    trainer = train(tmp_path, n=40, buffer="fifo", pseudo_epochs=2, use_default_hooks=False,
                    hooks=[PseudoEpochHook(2), StopAtEnd()])  # fmt: skip
    assert trainer.state.pseudo_epoch == 1  # the rewind was requested too, and done
    assert trainer.state.global_step == 5  # but no step of the replay: stopped at the sync


def test_the_cadence_resumes_from_the_trainer_state(tmp_path: Path) -> None:
    """FlowHook keeps no counter: a run resumed at its last step, with nothing left to
    do, does not log, validate or save that step again."""
    validation = list(linear_samples(16, seed=5))
    options: dict[str, Any] = dict(eval_dataset=validation, eval_steps=2, max_steps=4,
                                   save_at_end=True, report_to="none")  # fmt: skip
    first = train(tmp_path, **options).state
    assert (first.last_log_step, first.last_eval_step, first.last_save_step) == (4, 4, 4)
    log = ActionLog(None)
    resumed = train(tmp_path, hooks=[log], resume_from_checkpoint="latest", **options).state
    assert log.events == [] and resumed.global_step == 4
    assert resumed.best_metric == first.best_metric and resumed.best_step == first.best_step
