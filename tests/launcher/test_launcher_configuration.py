"""The launcher's configuration: command templates format each token without a shell,
a bad configuration or `LauncherTuning` field is refused at construction naming it, an
unpicklable callable and an empty study are refused, a worker imports only the standard
library and pyzmq."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from launcher_runs import launcher

from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.templates import CommandTemplate

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")


def test_command_templates_format_each_token_without_a_shell() -> None:
    template = CommandTemplate(
        "solver --id {simulation_id:03d} --out '{rendezvous_dir}/a b' {parameters} "
        "--x={x:.2f} --json {parameters_json}",
        ["x", "y"],
    )
    argv = template.format(7, {"x": 0.125, "y": 2.0}, "/tmp/my dir")
    assert argv == [
        "solver", "--id", "007", "--out", "/tmp/my dir/a b", "0.125", "2.0", "--x=0.12",
        "--json", '{"x": 0.125, "y": 2.0}',
    ]  # fmt: skip
    assert CommandTemplate(["run", "p={parameters}"], ["x", "y"]).format(
        1, {"x": 1.0, "y": 2.0}, "/r"
    ) == ["run", "p=1.0 2.0"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"simulation": "sim {nope}"}, r"unknown placeholder \{nope\}"),
        ({"simulation": "sim {0}"}, "bad placeholder"),
        ({"simulation": ""}, "empty"),
        ({"simulation": "sim {simulation_id}", "worker": True}, "worker"),
        ({"ranks_per_simulation": 2}, "MPI backend"),
        ({"job_limit": 0}, "job_limit"),
        ({"tuning": {"max_restarts": 1}}, "tuning must be a melissa_trainer.launcher.Launcher"),
        ({"n_simulations": 3, "sampler": [{"x": 1.0}, {"x": 2.0}]}, "fewer than"),
        ({"simulation": lambda sid: None}, "fn\\(simulation_id, parameters\\)"),
        ({"backend": "cloud"}, "unknown launcher backend"),
        ({"env": {"A": 1}}, "env"),
    ],
)
def test_bad_configuration_fails_at_construction(kwargs: dict[str, Any], match: str) -> None:
    arguments: dict[str, Any] = {
        "simulation": "sim {x}",
        "sampler": make_sampler("uniform", {"x": (0, 1)}),
        "n_simulations": 2,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        Launcher(arguments.pop("simulation"), arguments.pop("sampler"), **arguments)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("simulation_timeout", 0, r"simulation_timeout must be .* > 0 \(or 'auto', or None for"),
        ("simulation_timeout", "Auto", r"simulation_timeout must be .* > 0 \(or 'auto', or None"),
        ("simulation_timeout", float("inf"), "simulation_timeout must be a finite number"),
        ("silence_floor", 0, "silence_floor must be a finite number of seconds > 0"),
        ("silence_factor", 0.5, r"silence_factor must be a finite number >= 1"),
        ("startup_timeout", -1, r"startup_timeout must be .* > 0 \(or None for no bound\)"),
        ("max_restarts", -1, r"max_restarts must be an int >= 0"),
        ("max_restarts", 1.0, r"max_restarts must be an int >= 0"),
        ("on_failure", "retry", r"on_failure must be one of \['redraw', 'abandon', 'raise'\]"),
        ("max_redraws", True, "max_redraws must be an int >= 0"),
        ("min_finished_fraction", 0, r"min_finished_fraction must be a number in \(0, 1\]"),
        ("min_finished_fraction", 1.5, r"min_finished_fraction must be a number in \(0, 1\]"),
        ("poll_interval", 0, "poll_interval must be a finite number of seconds > 0"),
        ("poll_interval", "0.1", "poll_interval must be a finite number of seconds > 0"),
        ("kill_grace", -1, "kill_grace must be a finite number of seconds >= 0"),
    ],
)
def test_launcher_tuning_names_the_bad_field(field: str, value: Any, match: str) -> None:
    """Checked when made, and again by `dataclasses.replace`: the message starts with
    the field's full name."""
    with pytest.raises(ValueError, match=f"^LauncherTuning.{match}"):
        LauncherTuning(**{field: value})
    with pytest.raises(ValueError, match=f"^LauncherTuning.{match}"):
        dataclasses.replace(LauncherTuning(), **{field: value})


def test_launcher_tuning_is_frozen_and_holds_seconds_as_floats() -> None:
    tuning = LauncherTuning(simulation_timeout=3, kill_grace=0, poll_interval=1)
    assert (tuning.simulation_timeout, tuning.kill_grace, tuning.poll_interval) == (3.0, 0.0, 1.0)
    assert all(isinstance(v, float) for v in (tuning.simulation_timeout, tuning.kill_grace))
    with pytest.raises(
        dataclasses.FrozenInstanceError, match="cannot assign to field 'max_restarts'"
    ):
        tuning.max_restarts = 5  # type: ignore[misc]
    assert LauncherTuning(min_finished_fraction=1).min_finished_fraction == 1
    with pytest.raises(TypeError, match="poll_interval"):  # tuning is no Launcher argument
        Launcher("sim {x}", [{"x": 0.0}], 1, poll_interval=0.1)  # type: ignore[call-arg]


def test_an_unpicklable_callable_is_refused_at_construction() -> None:
    import threading

    lock = threading.Lock()
    with pytest.raises(ValueError, match="cannot be pickled"):
        Launcher(lambda sid, p: lock.acquire(), [{"x": 0.0}], 1)


@pytest.mark.e2e
def test_a_worker_imports_only_the_standard_library_and_pyzmq() -> None:
    code = (
        "import sys, melissa_trainer.client.worker\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'scipy', 'torch', 'accelerate', 'cloudpickle'))\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_empty_study_is_refused(tmp_path: Path) -> None:
    # it ran, trained nothing and exited 0 silently (tests/launcher/test_n_simulations.py)
    with pytest.raises(ValueError, match="n_simulations must be an int >= 1"):
        launcher("sim {x}", 0)
