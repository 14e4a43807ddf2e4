"""The launch's mixed precision counts (user trial 5, F7): ``accelerate launch
--mixed_precision bf16 train.py`` (which exports ACCELERATE_MIXED_PRECISION=bf16) used to
train in float32 without a word, the script's default ``"no"`` passed to the
`Accelerator` winning over it. The rule (`device_checks.resolve_mixed_precision`):

* the script's `mixed_precision` unset: the launch's value, else ``"no"``;
* set: the script's value, with a warning naming both when the launch asks for fp16
  or bf16 (a launch's ``no`` is its default, and conflicts with nothing);
* `TrainingArguments` holds the value used (what a checkpoint saves, what a resume
  compares); the launch's fp16 on a CPU is the same usage error as the flag's, naming
  the launch.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch
from helpers import linear_samples, small_model, xy
from process_tree import run_group

from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint.resumed_args import changed_settings
from melissa_trainer.config.reading import ConfigError

pytestmark = pytest.mark.timeout(120)

ENV = "ACCELERATE_MIXED_PRECISION"


def _trainer(args: TrainingArguments) -> OnlineTrainer:
    model = small_model(0)
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=list(linear_samples(64)),
        process_sample=xy,
    )


def test_unset_takes_the_launch_s_precision_and_the_trainer_trains_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "bf16")
    monkeypatch.setenv("ACCELERATE_USE_CPU", "1")
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none")
    assert args.mixed_precision == "bf16"  # what was used, as a checkpoint saves it
    assert args.to_dict()["mixed_precision"] == "bf16"
    trainer = _trainer(args)
    assert trainer.accelerator.mixed_precision == "bf16"


def test_a_resume_without_the_launch_s_precision_names_the_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoint records the launch's bf16; a resume launched without it trains
    in float32, which the resume's changed-settings warning names."""
    monkeypatch.setenv(ENV, "bf16")
    saved = TrainingArguments().to_dict()
    monkeypatch.delenv(ENV)
    changes = changed_settings(saved, TrainingArguments().to_dict())
    assert changes == ["mixed_precision 'bf16' -> 'no'"]


def test_no_launch_and_the_launch_s_no_leave_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert TrainingArguments().mixed_precision == "no"
    monkeypatch.setenv(ENV, "no")  # `accelerate launch` without --mixed_precision
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the script's bf16 conflicts with nothing
        assert TrainingArguments(mixed_precision="bf16").mixed_precision == "bf16"
        assert TrainingArguments().mixed_precision == "no"


@pytest.mark.parametrize("given", ["no", "BF16", False])  # (False: YAML's bare `no`)
def test_the_script_s_value_wins_and_a_conflict_is_warned_naming_both(
    given: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "fp16")
    with pytest.warns(UserWarning) as said:
        args = TrainingArguments(mixed_precision=given)  # type: ignore[arg-type]
    mine = "bf16" if given == "BF16" else "no"
    assert args.mixed_precision == mine
    (message,) = [str(w.message) for w in said]
    assert "'fp16'" in message and f"mixed_precision is {mine!r}" in message
    assert ENV in message and "unset" in message


def test_the_same_value_on_both_is_no_conflict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TrainingArguments(mixed_precision="bf16").mixed_precision == "bf16"


def test_a_launch_precision_not_run_here_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "fp8")
    with pytest.raises(ConfigError, match=f"asks for 'fp8' \\({ENV}"):
        TrainingArguments()
    assert TrainingArguments(mixed_precision="bf16").mixed_precision == "bf16"


def test_the_launch_s_fp16_on_a_cpu_is_the_flag_s_usage_error_naming_the_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV, "fp16")
    monkeypatch.setenv("ACCELERATE_USE_CPU", "1")
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path)]
        )
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert f"mixed_precision='fp16' (the launch's: {ENV}='fp16'" in err, err
    assert "set mixed_precision='bf16'" in err
    # built in Python, the trainer refuses it when it is made, naming the launch too
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none")
    with pytest.raises(ConfigError, match=f"the launch's: {ENV}='fp16'"):
        _trainer(args)


PROBE = """
from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint.resumed_args import changed_settings
import torch
(args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
model = torch.nn.Linear(2, 1)
trainer = OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), lr=0.1),
                        train_source=[])
print("MP", args.mixed_precision, trainer.accelerator.mixed_precision, flush=True)
"""


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("flags", "expected"), [([], "bf16"), (["--mixed_precision", "no"], "no")])
def test_accelerate_launch_mixed_precision_reaches_the_trainer(
    tmp_path: Path, flags: list[str], expected: str
) -> None:
    """A real ``accelerate launch --mixed_precision bf16 --cpu``: the script's unset
    precision is the launch's; the script's own ``no`` wins, with the warning."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [accelerate, "launch", "--mixed_precision", "bf16", "--num_processes", "1", "--cpu"]
    cmd += ["--num_machines", "1", "--dynamo_backend", "no", str(script)]
    cmd += ["--output_dir", str(tmp_path / "out"), "--report_to", "none", *flags]
    env = {"PYTHONPATH": str(Path(__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    proc = run_group(cmd, timeout=150, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"MP {expected} {expected}" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    warned = "the launch asks for mixed precision 'bf16'" in proc.stderr
    assert warned == bool(flags), proc.stderr[-3000:]
