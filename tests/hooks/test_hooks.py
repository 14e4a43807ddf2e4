"""Built-in hooks: TensorBoard files read back, console logs, early stopping across resume."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import (
    EarlyStoppingHook,
    Event,
    Hook,
    HookList,
    OnlineTrainer,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

pytestmark = pytest.mark.timeout(60)


def train(
    tmp_path: Path,
    n: int = 160,
    hooks=(),
    eval_dataset=None,
    use_default_hooks: bool = True,
    **overrides: Any,
):
    options: dict[str, Any] = dict(  # FIFO: each sample once, the step counts rely on it
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        logging_steps=5,
    )
    args = TrainingArguments(**{**options, "save_at_end": False, **overrides})
    model = small_model()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(n)),
        process_sample=xy,
        hooks=hooks,
        eval_dataset=eval_dataset,
        use_default_hooks=use_default_hooks,
    )
    trainer.train()
    return trainer


def test_tensorboard_scalars_read_back_with_tensorboards_reader(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    validation = list(linear_samples(16, seed=5))
    trainer = train(
        tmp_path,
        eval_dataset=validation,
        eval_steps=10,
        report_to="tensorboard",
        buffer="reservoir",
        max_sample_reuse=2,
        max_steps=20,
    )
    logdir = Path(trainer.args.output_dir) / "runs"
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in [
        "train/loss",
        "train/learning_rate",
        "train/samples_per_second",
        "buffer/samples",
        "buffer/fill",
        "buffer/got",
        "eval/loss",
    ]:
        assert tag in tags["scalars"], (tag, tags["scalars"])
    assert [e.step for e in acc.Scalars("train/loss")] == [5, 10, 15, 20]
    assert [e.step for e in acc.Scalars("eval/loss")] == [10, 20]
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert [e.value for e in acc.Scalars("train/loss")] == pytest.approx(logged, rel=1e-6)
    assert "buffer/reuse" in tags["histograms"]


def test_report_to_none_writes_no_event_files(tmp_path: Path) -> None:
    trainer = train(tmp_path, report_to="none", max_steps=5)
    assert not (Path(trainer.args.output_dir) / "runs").exists()


def test_console_logs_when_the_bar_is_disabled(tmp_path: Path, capsys: Any) -> None:
    train(tmp_path, report_to="none", disable_progress_bar=True, max_steps=10)
    out = capsys.readouterr().out
    assert "step 5 | loss" in out and "step 10 | loss" in out
    assert "samples/s" in out and "buffer_fill" in out


def test_early_stopping_patience_survives_resume(tmp_path: Path) -> None:
    hook = EarlyStoppingHook(patience=3)
    # lr 0: nothing improves; validations at 2, 4 leave one validation of patience
    validation = list(linear_samples(16, seed=5))
    args = dict(eval_steps=2, save_steps=4, stop_sync_steps=1, report_to="none")
    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=8,
            max_steps=4,
            disable_progress_bar=True,
            **args,
        ),
        torch.optim.SGD(model.parameters(), lr=0.0),
        train_source=list(linear_samples(800)),
        process_sample=xy,
        hooks=[hook],
        eval_dataset=validation,
    )
    first = trainer.train()
    assert first.validations_since_best == 1 and first.best_step == 2

    resumed = EarlyStoppingHook(patience=3)
    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=8,
            max_steps=100,
            disable_progress_bar=True,
            resume_from_checkpoint="latest",
            **args,
        ),
        torch.optim.SGD(model.parameters(), lr=0.0),
        train_source=list(linear_samples(800)),
        process_sample=xy,
        hooks=[resumed],
        eval_dataset=validation,
    )
    state = trainer.train()
    assert state.best_metric == first.best_metric and state.best_step == 2
    # two more validations without improvement (steps 6 and 8) exhaust the patience
    assert state.global_step == 8 and state.validations_since_best == 3


def test_early_stopping_accepts_the_state_of_earlier_versions(caplog: Any) -> None:
    hook = EarlyStoppingHook(patience=2)
    hook.load_state_dict({"best": 0.5, "bad_validations": 1})
    assert "restarts from 0" in caplog.text
    with pytest.raises(ValueError, match="has no state"):
        hook.load_state_dict({"other": 1})


def test_the_best_metric_is_the_best_finite_value() -> None:
    state = TrainerState()
    for step, value in enumerate([float("nan"), 3.0, 2.0, 2.5, float("inf"), 2.0], 1):
        state.global_step = step
        state.record_metric({"eval_loss": value}, "eval_loss", greater_is_better=False)
    assert (state.best_metric, state.best_step, state.validations_since_best) == (2.0, 3, 3)
    state = TrainerState()
    assert state.record_metric({"m": 1.0}, "m", True) and state.record_metric({"m": 2.0}, "m", True)
    assert state.best_metric == 2.0 and state.validations_since_best == 0
    with pytest.raises(KeyError, match="returned \\['m'\\]: set it"):
        state.record_metric({"m": 1.0}, "eval_loss", False)


def test_hook_names_must_be_unique() -> None:
    class A(Hook):
        pass

    with pytest.raises(ValueError, match="two hooks are named 'A'"):
        HookList([A(), A()])


def test_only_overriding_hooks_are_called() -> None:
    calls: list[str] = []

    class OnlyStepEnd(Hook):
        def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
            calls.append("step_end")

    hooks = HookList([OnlyStepEnd()])
    assert hooks.listens(Event.STEP_END) and not hooks.listens(Event.STEP_START)
    hooks.fire(Event.STEP_START, None, TrainerState(), TrainerControl())
    hooks.fire(Event.STEP_END, None, TrainerState(), TrainerControl())
    assert calls == ["step_end"]


def test_every_event_has_a_hook_method() -> None:
    for event in Event:
        assert callable(getattr(Hook, event.value))


def test_checkpoint_with_unknown_hook_state_is_refused() -> None:
    with pytest.raises(ValueError, match="does not have"):
        HookList([]).load_state_dict({"Mystery": {"x": 1}})


def test_a_checkpoint_takes_each_hooks_state_once() -> None:
    class Counted(Hook):
        calls = 0

        def state_dict(self) -> dict[str, Any]:
            Counted.calls += 1
            return {"calls": Counted.calls}

    class Stateless(Hook):
        pass

    states = HookList([Counted(), Stateless()]).state_dict()
    assert Counted.calls == 1
    assert states == {"Counted": {"calls": 1}}


def test_log_lines_show_only_the_source_counters_that_are_not_zero() -> None:
    from melissa_trainer.hooks.progress import format_logs

    line = format_logs(
        7,
        {"loss": 0.5, "source_messages": 12.0, "source_rejected_bad_size": 0.0, "x": 0.0},
    )
    assert line == "step 7 | loss 0.5 | messages 12 | x 0"


def test_log_lines_show_counts_exactly() -> None:
    # `samples_put` is how a user checks that a resumed study took every (simulation,
    # time step) once (docs/how-to/own-solver.md): printed `1.234e+04` it could not be
    # checked past 10,000 samples; measures that are not whole numbers keep 4 figures
    from melissa_trainer.hooks.progress import format_logs

    line = format_logs(
        9,
        {
            "loss": 0.012345678,
            "source_samples_put": 123457.0,
            "source_bytes": 5.072e9,
            "buffer_got": 10240.0,
            "samples_per_second": 12345.678,
            "huge": 1e20,
        },
    )
    assert line == (
        "step 9 | loss 0.01235 | samples_put 123457 | bytes 5072000000 | buffer_got 10240"
        " | samples/s 1.235e+04 | huge 1e+20"
    )


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


def test_tensorboard_renders_the_logs_of_the_flow_hook_without_the_progress_hook(
    tmp_path: Path,
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from melissa_trainer import FlowHook, TensorBoardHook

    logdir = tmp_path / "tb"
    trainer = train(tmp_path, max_steps=10, use_default_hooks=False,
                    hooks=[FlowHook(logging_steps=4), TensorBoardHook(str(logdir))])  # fmt: skip
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    # every 4 steps, and the final log at the last step
    assert [e.step for e in acc.Scalars("train/loss")] == [4, 8, 10]
    assert trainer.state.last_log_step == 10


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


def test_a_resumed_run_says_which_checkpoint_it_resumed_from(tmp_path: Path, capsys: Any) -> None:
    train(tmp_path, max_steps=3, save_at_end=True, report_to="none")
    capsys.readouterr()
    train(tmp_path, max_steps=5, resume_from_checkpoint="latest", report_to="none",
          disable_progress_bar=True)  # fmt: skip
    out = capsys.readouterr().out
    assert f"step 3 | resumed from {tmp_path / 'out' / 'checkpoints' / 'checkpoint-3'}" in out
    train(tmp_path / "fresh", max_steps=2, report_to="none", disable_progress_bar=True)
    assert "resumed" not in capsys.readouterr().out  # a fresh run says nothing of the kind


def test_a_hook_method_that_would_fail_or_never_run_is_refused_when_added() -> None:
    class WrongSignature(Hook):
        def on_log(self, trainer: Any, state: TrainerState, logs: dict) -> None:  # no control
            pass

    with pytest.raises(TypeError, match=r"WrongSignature.on_log cannot take the arguments"):
        HookList([WrongSignature()])

    class OtherLibrarysName(Hook):
        def on_train_begin(self, trainer: Any, state: TrainerState, control: Any) -> None:
            pass

    with pytest.raises(
        TypeError, match=r"on_train_begin is not a hook event.*did you mean on_train_start\?"
    ):
        HookList([OtherLibrarysName()])

    class Flexible(Hook):  # extra defaults and *args bind: accepted
        def on_log(self, trainer: Any, *rest: Any, extra: int = 0) -> None:
            pass

        def on_save(self, trainer: Any, state: Any, control: Any, path: str, x: int = 1) -> None:
            pass

    assert HookList([Flexible()]).listens(Event.LOG)


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("on_train_begin", "on_train_start"),  # HF TrainerCallback
        ("on_epoch_begin", "on_pseudo_epoch_start"),
        ("on_epoch_end", "on_pseudo_epoch_end"),
        ("on_step_begin", "on_step_start"),
        ("on_evaluate", "on_validation_end"),
        ("on_fit_start", "on_train_start"),  # Lightning's Callback
        ("on_train_batch_end", "on_step_end"),
        ("on_save_checkpoint", "on_save"),
        ("on_logs", "on_log"),  # a typo: the nearest spelling
        ("on_init_end", None),  # none does the same: no hint (difflib: on_train_end)
        ("on_before_backward", None),  # (difflib: on_after_backward)
        ("on_test_start", None),  # (difflib: on_step_start)
        ("on_optimizer_step", None),
    ],
)
def test_another_librarys_callback_name_is_pointed_at_our_event(
    theirs: str, ours: str | None
) -> None:
    """An HF or Lightning user's method name gets the event that does the same here,
    not the nearest spelling (difflib says on_train_end for on_train_begin)."""
    hook = type("Theirs", (Hook,), {theirs: lambda self, trainer, state, control: None})()
    with pytest.raises(TypeError, match=rf"Theirs.{theirs} is not a hook event") as raised:
        HookList([hook])
    hint = re.search(r"did you mean (\w+)\?", str(raised.value))
    assert (hint and hint.group(1)) == (ours or None), raised.value


def test_a_wrong_hook_fails_before_training_starts(tmp_path: Path) -> None:
    class Typo(Hook):
        def on_logs(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
            pass

    with pytest.raises(TypeError, match="did you mean on_log"):
        train(tmp_path, hooks=[Typo()], max_steps=2)
    assert not (tmp_path / "out" / "checkpoints").exists()  # nothing ran


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"eval_steps": 5}, "eval_steps=5 asks for validation"),
        ({"early_stopping_patience": 2}, "early_stopping_patience=2 asks for validation"),
    ],
)
def test_validation_asked_for_without_an_eval_dataset_is_refused_before_training(
    tmp_path: Path, overrides: dict[str, Any], named: str
) -> None:
    """A user's script passed --eval_steps 5 and no eval_dataset: the run trained 65
    steps without one validation and without a word (early stopping alike: it never
    stops). Refused when the trainer is made, naming the setting and the fix."""
    with pytest.raises(ValueError, match=named) as caught:
        train(tmp_path, **overrides)
    assert "eval_dataset=" in str(caught.value)
    assert not (tmp_path / "out" / "checkpoints").exists()
