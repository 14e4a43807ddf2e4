"""Flags this machine's training device cannot run (fp16 on a CPU, CUDA graphs off CUDA)
are usage errors of the command line, as any bad flag is: `ArgumentParser` exits 2
naming the flag and the fix (``argument --mixed_precision: ...``) before the script
builds anything, where they used to pass parsing and end `OnlineTrainer(...)` in a
traceback after the model was built. `TrainingArguments` built in Python still accepts
them, the trainer refusing them when it is made (Hugging Face's behaviour;
tests/trainer/test_mixed_precision.py, tests/trainer/test_compile.py). One check serves
both (`config.device_checks.device_problems`).

The device is made the CPU with ACCELERATE_USE_CPU (as on a machine without CUDA, and
the same on one with a GPU); one test takes this machine as it is and runs where it has
no CUDA device."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from melissa_trainer import ArgumentParser, TrainingArguments
from melissa_trainer.config.compile_options import CompileOptions
from melissa_trainer.config.device_checks import device_problems

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(__file__).parents[1] / "scripts" / "train_tiny.py"
FP16 = "argument --mixed_precision: mixed_precision='fp16' on cpu"
#: each flag, the start of the error that names it, and the fix it must name
CASES = [
    (["--mixed_precision", "fp16"], FP16, "set mixed_precision='bf16'"),
    (
        ["--torch_compile_mode", "reduce-overhead"],
        "argument --torch_compile_mode: torch_compile_mode='reduce-overhead' captures CUDA "
        "graphs, but this run trains on cpu",
        "leave torch_compile_mode unset",
    ),
    (
        ["--torch_compile_mode", "max-autotune"],
        "argument --torch_compile_mode: torch_compile_mode='max-autotune' is inductor's "
        "kernel search plus CUDA graphs",  # (trial 29: not CUDA graphs alone)
        "set torch_compile_mode='max-autotune-no-cudagraphs' for the same kernel search",
    ),
    (
        ["--torch_compile_backend", "cudagraphs"],
        "argument --torch_compile_backend: torch_compile_backend='cudagraphs' captures CUDA",
        "torch_compile_backend='inductor'",
    ),
]
IDS = [flags[1] for flags, _, _ in CASES]


def parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The stderr of parsing `argv`, which must exit with argparse's status 2."""
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    assert raised.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(("flags", "said", "fix"), CASES, ids=IDS)
def test_a_flag_the_cpu_cannot_run_is_a_usage_error(
    flags: list[str],
    said: str,
    fix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ACCELERATE_USE_CPU", "1")
    err = parse_error(flags, capsys)
    assert said in err and fix in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_fp16_on_this_machine_without_cuda_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    assert FP16 in parse_error(["--mixed_precision", "fp16"], capsys)


def test_both_are_said_at_once_and_a_config_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACCELERATE_USE_CPU", "1")
    config = tmp_path / "run.yaml"
    config.write_text("mixed_precision: fp16\n")
    err = parse_error(["--config", str(config), "--torch_compile_mode", "reduce-overhead"], capsys)
    assert f"in --config {config}, key 'mixed_precision': mixed_precision='fp16'" in err, err
    assert "argument --torch_compile_mode: torch_compile_mode='reduce-overhead'" in err, err


def test_every_rank_of_a_launch_says_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node's device is its own (nodes may differ): rank 1 says it too, without any
    collective (the parse forms no process group)."""
    monkeypatch.setenv("ACCELERATE_USE_CPU", "1")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert FP16 in parse_error(["--mixed_precision", "fp16"], capsys)


def test_arguments_built_in_python_are_left_to_the_trainer() -> None:
    """HF's behaviour: arguments made on one machine may run on another."""
    args = TrainingArguments(mixed_precision="fp16", torch_compile_mode="reduce-overhead")
    assert args.mixed_precision == "fp16" and args.torch_compile_mode == "reduce-overhead"


def test_a_cuda_device_can_run_them() -> None:
    graphs = CompileOptions(mode="reduce-overhead")
    assert device_problems("fp16", graphs, "cuda") == []
    assert device_problems("bf16", CompileOptions(), "cpu") == []
    assert len(device_problems("fp16", graphs, "cpu")) == 2


def test_the_prediction_survives_an_accelerate_that_reads_its_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`planned_device_type` reads `PartialState.default_device` without an instance (an
    instance would form the process group). Should a later Accelerate read its instance
    there, the prediction falls back to the common devices rather than failing the parse."""
    from accelerate import PartialState

    from melissa_trainer.config.device_checks import planned_device_type

    def reads_its_instance(self: PartialState) -> torch.device:
        return self.device  # (None.device: AttributeError)

    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(PartialState, "default_device", property(reads_its_instance))
    expected = "cuda" if torch.cuda.is_available() else None
    got = planned_device_type()
    assert got == expected if expected else got in ("mps", "cpu")


@pytest.mark.e2e
@pytest.mark.parametrize(("flags", "said", "fix"), CASES[:2], ids=IDS[:2])
def test_a_script_given_such_a_flag_exits_2_before_building_anything(
    flags: list[str], said: str, fix: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "ACCELERATE_USE_CPU": "1"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--output_dir", str(out), "--max_steps", "2", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-4000:]
    assert said in proc.stderr and fix in proc.stderr, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    assert "parsed: building the model" not in proc.stdout  # nothing built
    assert not out.exists()  # nor the output directory made (and locked)
