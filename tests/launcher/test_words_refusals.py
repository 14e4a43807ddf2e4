"""Each refusal a user met from the Python API (htrial16) names the field and the fix:
`job_limit=0` said only "must be an int >= 1, not 0"; an unknown sampler named neither
its argument nor the way to a sampler of one's own. The others are pinned as they are."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from melissa_trainer.buffers import META_FILE
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.reshard import check_same_ranks_buffer
from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.trainer.lock_holder import Holder, OutputDirLocked
from melissa_trainer.trainer.simulation_errors import check_best_metric

BOUNDS = {"a": (0.0, 1.0)}
COMMAND = [sys.executable, "-c", "pass"]


def refusal(**kwargs: Any) -> str:
    options: dict[str, Any] = {"n_simulations": 2, **kwargs}
    with pytest.raises(ValueError) as info:
        Launcher(COMMAND, make_sampler("lhs", BOUNDS), **options)
    return str(info.value)


def test_job_limit_zero_names_the_fix() -> None:
    assert refusal(job_limit=0) == (
        "job_limit must be an int >= 1 (the jobs alive at once: give 1 or more), not 0"
    )


@pytest.mark.parametrize(
    ("field", "value", "fix"),
    [
        ("n_simulations", 0, "give 1 or more"),
        ("ranks_per_simulation", 0, "MPI ranks per job: give 1 or more"),
        ("first_simulation_id", -1, "give 0 or more"),
    ],
)
def test_the_launcher_counts_name_the_field_and_the_fix(field: str, value: int, fix: str) -> None:
    words = refusal(**{field: value})
    assert words.startswith(f"{field} must be an int >= ")
    assert f"{fix}), not {value}" in words


def test_an_unknown_sampler_names_the_argument_the_choices_and_a_sampler_of_ones_own() -> None:
    with pytest.raises(ValueError) as info:
        make_sampler("nosuch", BOUNDS)
    assert str(info.value) == (
        "unknown sampler 'nosuch' (make_sampler's kind): choose one of ['breed', "
        "'density', 'halton', 'lhs', 'sobol', 'surrogate', 'uniform'], or give "
        "Launcher(sampler=...) a Sampler of your own"
    )


def test_a_wrong_metric_for_best_model_names_the_field_and_the_choices() -> None:
    val = [{"x": torch.zeros(1), "y": torch.zeros(1)}]
    with pytest.raises(ValueError) as info:
        check_best_metric("eval_losss", val)
    words = str(info.value)
    assert words.startswith("metric_for_best_model='eval_losss' is not a metric ")
    assert "eval_loss; set it to one of them" in words


def test_the_output_dir_lock_names_the_flag_and_the_fix() -> None:
    holder = Holder(
        host="vm", pid=18420, since="2026-12-01T10:00:58", run_id="7ff5", state="running"
    )
    words = str(OutputDirLocked("out/lock", holder))
    assert words.startswith("output_dir 'out/lock' is in use by another trainer (host vm, pid")
    assert "Give this run another --output_dir, or wait for that trainer to end" in words
    assert "(kill 18420 on vm if it should not run)" in words


def test_a_buffer_kind_change_on_resume_names_the_flag_and_the_value(tmp_path: Path) -> None:
    rank = ckpt.rank_path(tmp_path, 0)
    rank.mkdir()
    (rank / META_FILE).write_text(json.dumps({"kind": "fifo", "capacity": 100}))
    trainer = SimpleNamespace(
        buffer=SimpleNamespace(kind="reservoir", capacity=100),
        args=SimpleNamespace(buffer="reservoir"),
        process_index=0,
        num_processes=1,
    )
    with pytest.raises(ValueError) as info:
        check_same_ranks_buffer(tmp_path, trainer)  # (a stand-in: kind, capacity, flag)
    assert str(info.value) == (
        "the checkpoint's buffers are 'fifo', this run's 'reservoir' (--buffer reservoir): a "
        "buffer's samples and statistics are its kind's; resume with --buffer fifo"
    )


@pytest.mark.parametrize("name", ["lhs", "LHS"])
def test_a_sampler_name_in_launchers_second_argument_names_it_and_make_sampler(name: str) -> None:
    # (htrial17: "parameter set 0 must map exactly ['l'] to numbers, got 'l'")
    with pytest.raises(ValueError) as info:
        Launcher(COMMAND, name, n_simulations=2)
    assert str(info.value) == (
        "Launcher's `sampler` (its second argument) is a Sampler or a list of parameter "
        f"sets ({{name: value}} mappings), not the str {name!r}: for a sampler by name "
        "give make_sampler('lhs', bounds, seed=0), e.g. Launcher(simulation, "
        "make_sampler('lhs', {'a': (0.0, 1.0)}, seed=0), n_simulations)"
    )


def test_an_unknown_name_there_lists_the_kinds() -> None:
    with pytest.raises(ValueError) as info:
        Launcher(COMMAND, "nosuch", n_simulations=2)
    words = str(info.value)
    assert "not the str 'nosuch': for a sampler by name give make_sampler(kind, bounds, " in words
    assert "seed=0) with a kind of ['breed', 'density', 'halton', 'lhs', 'sobol'" in words


def test_bounds_in_launchers_second_argument_name_make_sampler_and_a_list() -> None:
    with pytest.raises(ValueError) as info:
        Launcher(COMMAND, {"a": (0.0, 1.0)}, n_simulations=2)  # type: ignore[arg-type]
    words = str(info.value)
    assert "not one mapping {'a': (0.0, 1.0)}: for a sampler of these bounds give " in words
    assert "make_sampler(kind, bounds, seed=0)" in words and "a list of it: [{...}]" in words


def test_parameter_sets_and_samplers_are_still_a_launchers_sampler() -> None:
    from melissa_trainer.launcher.samplers import ListSampler, as_sampler

    listed = as_sampler([{"a": 0.5}, {"a": 0.7}])
    assert isinstance(listed, ListSampler) and len(listed) == 2
    sampler = make_sampler("lhs", BOUNDS)
    assert as_sampler(sampler) is sampler


def test_an_uppercase_sampler_name_is_told_its_lowercase_one() -> None:
    with pytest.raises(ValueError) as info:
        make_sampler("LHS", BOUNDS)
    assert str(info.value).startswith(
        "unknown sampler 'LHS' (make_sampler's kind): did you mean 'lhs'? (the names are "
        "lowercase) choose one of ['breed', "
    )
    with pytest.raises(ValueError, match=r"did you mean 'sobol'\?"):
        make_sampler("sobel", BOUNDS)
