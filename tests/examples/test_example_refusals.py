"""Every study example (heat_pde, lorenz, heat_c, navier_stokes) refuses a bad flag in
two lines on stderr, exit status 2: a one-line usage (``--help`` lists the flags) and the
error naming the flag, as the library's own refusals do; not ~45 lines of usage before
"invalid HeatArgs: ..." (a class of the example's code). One parser does it for all:
`study_common.ShortUsageParser`."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

#: example -> (a bad value of its own or of the study's, the error line after "PROG: error: ")
REFUSED = {
    "heat_pde": (["--hidden", "0"], "argument --hidden: hidden=0 must be >= 1"),
    "lorenz": (["--horizon", "0"], "argument --horizon: horizon=0 must be >= 1"),
    "heat_c": (["--ranks", "0"], "argument --ranks: ranks=0 must be >= 1"),
    "navier_stokes": (["--job_limit", "0"], "argument --job_limit: job_limit=0 must be >= 1"),
}  # fmt: skip


def example_train(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """`name`'s train module (examples/ is on the tests' sys.path), with sys.path put back
    afterwards: heat_c's train.py puts its own folder first (its reference.py), whose
    train.py would otherwise shadow another's."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    return importlib.import_module(f"{name}.train")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_bad_value_is_two_lines_the_short_usage_and_the_error_naming_its_flag(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, said = REFUSED[name]
    parser = example_train(name, monkeypatch).parser(argv)
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        parser.parse_args_into_dataclasses(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"usage: {parser.prog} [-h] [--FLAG VALUE ...] (--help lists them)",
        f"{parser.prog}: error: {said}",
    ]


#: (example, flags, the problems said, in order): each option's own range first, then
#: the checks between options, each left out where an option it relates is out of range
ORDERED = [
    # a user trial: "modes=12 needs grid_size >= 24: lower --modes" led, before the
    # grid's own error; a bound on the modes from a grid of -8 points means nothing
    ("navier_stokes", ["--grid_size", "-8"],
     ["argument --grid_size: grid_size=-8 must be even and >= 8"]),
    ("navier_stokes", ["--grid_size", "0"],
     ["argument --grid_size: grid_size=0 must be even and >= 8"]),
    ("navier_stokes", ["--grid_size", "6", "--model", "unet"],
     ["argument --grid_size: grid_size=6 must be even and >= 8"]),
    ("navier_stokes", ["--interval", "-1"], ["argument --interval: interval=-1.0 must be > 0"]),
    ("navier_stokes", ["--grid_size", "10", "--layers", "0"],
     ["argument --layers: layers=0 must be >= 1",
      "modes=12 needs grid_size >= 24: raise --grid_size to 24 or more, or lower --modes to 5 "
      "or fewer"]),
    ("navier_stokes", ["--dt", "1", "--time_steps", "0"],
     ["argument --time_steps: time_steps=0 must be >= 1",
      "argument --dt: dt=1.0 must be <= interval=0.5"]),
    ("lorenz", ["--time_steps", "0"], ["argument --time_steps: time_steps=0 must be >= 1"]),
    ("lorenz", ["--horizon", "2000", "--dt", "0"],
     ["argument --dt: dt=0.0 must be > 0",
      "argument --horizon: horizon=2000 must be <= time_steps=1000"]),
    ("heat_c", ["--ny", "-1", "--ranks", "4"], ["argument --ny: ny=-1 must be >= 1"]),
    ("heat_c", ["--ny", "2", "--ranks", "3", "--r", "0.5"],
     ["argument --r: r=0.5 must be in (0, 0.25] (stability)",
      "argument --ny: ny=2 must be >= ranks=3"]),
    # the solver's rules name their flag too (they said "invalid heat-equation
    # configuration: grid_size=1 must be >= 2", naming no flag)
    ("heat_pde", ["--grid_size", "1", "--dt", "0"],
     ["argument --grid_size: grid_size=1 must be >= 2", "argument --dt: dt=0.0 must be > 0"]),
    ("heat_pde", ["--simulation_timeout", "100", "--silence_floor", "5", "--hidden", "0"],
     ["argument --hidden: hidden=0 must be >= 1",
      "argument --silence_floor: silence_floor=5.0 changes nothing with simulation_timeout=100.0: "
      "it shapes only the derived timeout; drop --silence_floor, or drop --simulation_timeout "
      "to derive the timeout"]),
]  # fmt: skip


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("name", "argv", "said"), ORDERED, ids=[" ".join(o[1]) for o in ORDERED])
def test_own_ranges_are_said_first_and_a_check_against_a_value_out_of_range_not_at_all(
    name: str,
    argv: list[str],
    said: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = example_train(name, monkeypatch).parser(argv)
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        parser.parse_args_into_dataclasses(argv)
    assert info.value.code == 2
    lines = capsys.readouterr().err.splitlines()[1:]
    if len(said) == 1:
        assert lines == [f"{parser.prog}: error: {said[0]}"]
    else:  # (several problems: one a line under "PROG: error: ")
        assert lines == [f"{parser.prog}: error: ", *(f"  {line}" for line in said)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_examples_share_one_parser_whose_help_still_lists_every_flag(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import study_common

    parser = example_train(name, monkeypatch).parser([])
    assert type(parser) is study_common.ShortUsageParser
    said = parser.format_help()
    assert said.startswith(f"usage: {parser.prog} [-h]") and "[--num_simulations" in said
    assert "--num_simulations NUM_SIMULATIONS" in said and "--FLAG VALUE" not in said


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_program_says_the_words_the_configuration_how_to_quotes(tmp_path: Path) -> None:
    """docs/how-to/configuration.md's two lines, as a user running the example sees them
    (``train.py`` the program's name, nothing else on stderr, nothing started)."""
    script = Path(__file__).parents[2] / "examples" / "navier_stokes" / "train.py"
    cmd = [sys.executable, str(script), "--num_simulations", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=100, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "usage: train.py [-h] [--FLAG VALUE ...] (--help lists them)",
        "train.py: error: argument --num_simulations: num_simulations=0 must be >= 1",
    ]
    assert proc.stdout == "" and not list(tmp_path.iterdir())


#: a study example whose --plot (the default) needs the [examples] extra -> its main
PLOTTING = ["heat_pde", "lorenz", "navier_stokes"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", PLOTTING)
def test_a_missing_extra_is_a_usage_error_naming_it_before_anything_starts(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without matplotlib (``pip install -e .`` without ``[examples]``) the example ends as
    a missing ``--model neuralop`` package does: ``PROG: error: ...`` naming the extra,
    exit status 2 (a user trial, htrial12: it exited 1, the line without the program's
    name), and nothing started (no output_dir)."""
    train = example_train(name, monkeypatch)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    monkeypatch.setattr(sys, "argv", ["train.py"])
    out = tmp_path / "out"
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        train.main(["--output_dir", str(out)])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        'train.py: error: --plot needs matplotlib: pip install "melissa-trainer[examples]", '
        "or --no_plot"
    ]
    assert not out.exists()
