"""The Navier–Stokes example refuses, before anything starts (exit status 2, one line
naming the field and the fix, no traceback): a model its grid cannot hold, an option its
device cannot run, a typo in --resume_from_checkpoint, --model neuralop without its
package; and a longer --startup_timeout needs no longer stall_timeout."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

# examples/ is on the tests' sys.path (pyproject): the example's modules by package name
from navier_stokes import solver, train


def test_a_model_the_grid_cannot_hold_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        train.main(["--grid_size", "16", "--modes", "12"])
    assert info.value.code == 2
    assert "modes=12 needs grid_size >= 24" in capsys.readouterr().err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("model", ["fno", "neuralop"])
@pytest.mark.parametrize(("grid", "modes"), [("16", "12"), ("8", "5"), ("64", "40")])
def test_the_grid_s_refusal_names_every_way_out_with_values_that_pass(
    capsys: pytest.CaptureFixture[str], model: str, grid: str, modes: str
) -> None:
    """A user trial (htrial13): ``--grid_size 16`` was told "lower --modes" alone, no
    value, where the user wanted the grid. The refusal names both flags, each with a
    value; the oracle is the parser itself, given each fix in turn."""
    flags = ["--model", model, "--grid_size", grid, "--modes", modes]
    with pytest.raises(SystemExit):
        train.parser(flags).parse_args_into_dataclasses(flags)
    err = capsys.readouterr().err
    found = re.search(
        r"raise --grid_size to (\d+) or more, or lower --modes to (\d+) or fewer", err
    )
    assert found is not None, err
    for fixed in (
        ["--model", model, "--grid_size", found[1], "--modes", modes],
        ["--model", model, "--grid_size", grid, "--modes", found[2]],
    ):
        _, opts = train.parser(fixed).parse_args_into_dataclasses(fixed)  # not refused
        assert opts.problems() == []


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--mixed_precision", "fp16"], "mixed_precision='fp16' on cpu: Accelerate runs no fp16"),
        (
            ["--torch_compile_mode", "reduce-overhead"],
            "torch_compile_mode='reduce-overhead' captures CUDA graphs, but this run trains on cpu",
        ),
    ],  # fmt: skip
    ids=["fp16", "cuda_graphs"],
)
def test_an_option_this_device_cannot_run_is_a_usage_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    said: str,
) -> None:
    """On a CPU, fp16 (which Accelerate ignores there: the run trained in float32) and
    CUDA graphs end the example as a bad flag does (exit status 2, one line naming the
    field and the fix), not with a traceback, before any simulation starts."""
    import study_common

    monkeypatch.chdir(tmp_path)
    tiny = ["--grid_size", "16", "--modes", "4", "--width", "4", "--layers", "1",
            "--time_steps", "2", "--dt", "0.1", "--num_validation", "1", "--no_plot"]  # fmt: skip
    with pytest.raises(SystemExit) as info, study_common.refusals_end_the_program():
        train.main([*tiny, *flags])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "outputs" / "navier_stokes" / "rendezvous").exists()


def test_a_typo_in_the_resume_flag_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--resume_from_checkpoint lates` is a usage error (exit status 2, one line naming
    the field and 'latest'), before the validation set is solved or anything is written:
    it was a FileNotFoundError traceback from `train()` (the user trial)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        train.main(["--resume_from_checkpoint", "lates"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "resume_from_checkpoint='lates' is not a directory (did you mean 'latest'?)" in err
    assert "Traceback" not in err
    assert not (tmp_path / "outputs").exists()


def test_a_longer_startup_timeout_needs_no_longer_stall_timeout(tmp_path: Path) -> None:
    """`--startup_timeout 1800` (the how-to's fix for a slow start-up) was useless past
    600 s: with no message from any simulation for the stream's stall_timeout (600 s
    by default), the receiver stopped the study with a StallError before the launcher's
    allowance ran out (the user trial, scaled down: startup_timeout 60, stall_timeout
    8, a 20 s start-up stopped at 8 s). The study's watchdog now excuses a silence
    within the launcher's allowance (`tests/trainer/test_study_silence.py` runs the
    repro): the example keeps the default stall_timeout, and the excuse the other
    ranks get from the launcher's tuning covers the 1800 s."""
    import study_common

    from melissa_trainer.stream.receiver_config import STALL_TIMEOUT
    from melissa_trainer.study.launch import other_rank_excuse

    def source(**flags: float) -> Any:
        opts = train.FlowArgs(**flags)  # type: ignore[arg-type]
        _, study = study_common.study_source(
            opts, ["solver.py"], solver.PARAMETER_BOUNDS, seed=0,
            rendezvous=tmp_path / "rendezvous", fields={"x": ((2,), "float32")},
        )  # fmt: skip
        return study

    for startup in (60.0, 1800.0):
        study = source(startup_timeout=startup)
        assert study.stream.config.stall_timeout == STALL_TIMEOUT == 600.0
        excuse = other_rank_excuse(study.launcher.tuning)
        assert excuse is not None and excuse(startup - 1) is not None
        assert excuse(startup + 1) is None


def test_the_neuralop_model_without_its_package_is_refused_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        import neuralop  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("neuraloperator is installed: --model neuralop trains")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        train.main(["--model", "neuralop"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--model neuralop needs the neuraloperator package" in err
    assert 'pip install "melissa-trainer[neuralop]", or --model fno' in err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--num_simulations", "0"], "argument --num_simulations: num_simulations=0 must be >= 1"),
        (
            ["--grid_size", "30", "--modes", "4", "--model", "unet"],
            "argument --grid_size: grid_size=30 must be a multiple of 4 for the U-Net",
        ),
        (
            ["--modes", "40"],
            "argument --modes: modes=40 needs grid_size >= 80: raise --grid_size to 80 or more, "
            "or lower --modes to 32 or fewer",
        ),
        (["--batch_size", "abc"], "argument --batch_size: 'abc' is not an integer"),
    ],  # fmt: skip
    ids=["study", "unet", "model", "library"],
)
def test_a_refused_flag_is_one_line_of_usage_and_the_error_naming_it(
    capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    """A user trial: every refusal printed ~45 lines of usage before its one good line,
    which said "invalid FlowArgs:" (a class of the example's code). Now: one line of
    usage, then the error naming the flag, as the library's own refusals do."""
    with pytest.raises(SystemExit) as info:
        train.parser(flags).parse_args_into_dataclasses(flags)
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("usage: ") and "--help" in lines[0]
    assert lines[1].endswith(said) or said in lines[1], lines
    assert "FlowArgs" not in lines[1]


def test_json_promises_no_summary_from_a_stopped_run_and_a_stopped_run_prints_none(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--json's help (a user trial: it promised "a JSON summary as the last line", but a
    run stopped by Ctrl-C ends with the preemption's line and exit status 130): the help
    says a stopped run prints no summary and exits 128 + the signal, and the example
    does so when its training is preempted (the trainer raises `Preempted`)."""
    import signal

    import study_common

    from melissa_trainer import Preempted

    said = " ".join(train.parser([]).format_help().split())
    assert "A run stopped before its end (Ctrl-C, SIGTERM, its launcher's death) prints no" in said
    assert "130 for Ctrl-C, 143 for SIGTERM" in said

    def preempted(trainer: Any) -> Any:
        raise Preempted(signal.SIGINT, 80, str(tmp_path / "checkpoint-80"))

    monkeypatch.setattr(study_common, "train_timed", preempted)
    tiny = ["--grid_size", "16", "--modes", "4", "--width", "4", "--layers", "1",
            "--time_steps", "2", "--dt", "0.1", "--num_validation", "1", "--no_plot",
            "--num_simulations", "2", "--output_dir", str(tmp_path / "out"), "--json"]  # fmt: skip
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        train.main(tiny)
    assert info.value.code == 130 == 128 + signal.SIGINT
    assert "{" not in capsys.readouterr().out  # no JSON line: nothing to read as a summary


@pytest.mark.timeout(120)
def test_a_dt_too_large_for_the_held_out_simulations_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--dt 0.25`` at 64^2 (a user trial, 2026-12-04): the third held-out simulation
    blows up at t = 1.75. Before, its fields were Inf and NaN and the run started
    anyway (and ended with exit status 0); now the example stops before anything
    starts, exit status 2, one line naming --dt (a refusal: under accelerate launch said
    once, by rank 0)."""
    import study_common

    monkeypatch.chdir(tmp_path)
    tiny = ["--time_steps", "4", "--num_simulations", "2", "--num_validation", "3",
            "--width", "4", "--layers", "1", "--modes", "4", "--no_plot"]  # fmt: skip
    with pytest.raises(SystemExit) as info, study_common.refusals_end_the_program():
        train.main([*tiny, "--dt", "0.25"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: a held-out simulation: unstable at t=1.75" in err and "lower --dt" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "outputs" / "navier_stokes" / "rendezvous").exists()


def test_a_grid_no_memory_holds_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--grid_size 1000000` (a wrong grid: a few zeros too many) was a numpy
    ArrayMemoryError traceback from the held-out set's first field, exit status 1 (the
    user trial, 'Unable to allocate 14.6 TiB'); a grid just small enough to allocate ran
    for minutes before its reservoir outgrew the machine. It is now a usage error (exit
    status 2, one line naming --grid_size and the fix) before anything is solved or
    written: 520 samples of two float32 fields of 10^12 points exceed any memory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        train.main(["--grid_size", "1000000"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --grid_size: grid_size=1000000" in err
    assert "lower --grid_size or --buffer_size" in err
    assert "Traceback" not in err
    assert not (tmp_path / "outputs").exists()


def test_the_memory_check_counts_every_sample_a_rank_holds() -> None:
    """`cli.memory_problems` against a memory given: the default study (64^2, 480 + 40
    samples of 32 KiB: 17 MB) and the GPU command's (256^2, buffer 5120: 2.7 GB) pass
    in 4 GB; 2 ranks on one machine hold twice; no memory known, no check."""
    from navier_stokes import cli

    default = cli.FlowArgs()
    gpu = cli.FlowArgs(grid_size=256)
    gib = 2**30
    assert cli.memory_problems(480, default, 4 * gib) == []
    assert cli.memory_problems(5120, gpu, 4 * gib) == []
    # 5160 samples of 2 * 4 * 256^2 bytes = 2,705,326,080: between 2 and 3 GiB
    assert cli.memory_problems(5120, gpu, 3 * gib, ranks=1) == []
    (problem,) = cli.memory_problems(5120, gpu, 3 * gib, ranks=2)
    assert "grid_size=256" in problem and "on each of 2 ranks" in problem
    assert "5.41 GB" in problem and "lower --grid_size or --buffer_size" in problem
    assert cli.memory_problems(5120, gpu, 2 * gib) != []
    assert cli.memory_problems(480, cli.FlowArgs(grid_size=10**6), None) == []
    # the held-out set dominating: its flags, not the grid's, are named
    (problem,) = cli.memory_problems(480, cli.FlowArgs(time_steps=10**6), 4 * gib)
    assert problem.startswith("argument --time_steps: grid_size=64")
    assert "num_validation=4 x time_steps=1000000" in problem
    assert problem.endswith("lower --time_steps, --num_validation or --grid_size")
