"""The names that a moved module's old path (issue 45, `melissa_trainer._moved`) gave
before the move keep coming from it for one release: ``from melissa_trainer.<old path>
import ConfigError`` works (with the move's DeprecationWarning), and so does the same
import from the new path, each giving the owner's object. The modules re-export them as
``X as X`` (test_reexports.py's `KEPT_FOR_MOVED_PATHS`, which names exactly these)."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest
from test_reexports import KEPT_FOR_MOVED_PATHS

#: (old path, new path, owner now, name): what each old path gave before the move, and
#: the module that defines it today (the oracle: its object is the one expected)
NAMES: list[tuple[str, str, str, str]] = [
    (old, new, owner, name)
    for old, new, by_owner in [
        ("arguments", "config.arguments", {
            "config.arguments_file": ["ARGS_FILE"],
            "config.reading": [
                "ConfigError", "ConversionError", "FALSE_WORDS", "NONE_WORDS", "TRUE_WORDS",
                "UnknownArgumentError", "convert_value", "load_config_file",
                "unknown_key_problems", "unwrap_optional",
            ],
        }),
        ("argparser", "config.parser", {"config.fields": ["str_to_bool"]}),
        ("state", "core.state", {"core.control": ["TrainerControl"]}),
        ("dataset", "core.dataset", {
            "core.pending_file": [
                "PENDING_ARRAYS", "PENDING_FILES", "PENDING_META", "RECENT_ARRAYS",
                "read_pending",
            ],
            "core.simulation_ids": ["simulation_ids"],
        }),
        ("simulation_loss", "core.loss_per_simulation", {
            "core.loss_steps": ["DEFAULT_SIMULATION_LOSS_STEPS", "resolve_loss_steps"],
        }),
        ("checkpoint_registry", "checkpoint.registry", {
            "checkpoint.format": ["FORMAT_FILE", "FORMAT_VERSION"],
        }),
        ("preemption", "trainer.preemption", {
            "trainer.launcher_watch": ["launcher_parent"],
            "trainer.preempted": ["Preempted"],
        }),
        ("output_lock", "trainer.output_lock", {
            "trainer.output_dir_errors": ["ENV_OUTPUT_LOCK"],
        }),
    ]
    for owner, names in by_owner.items()
    for name in names
]  # fmt: skip


def test_the_list_is_the_re_export_tests_allow_list() -> None:
    listed = {(f"melissa_trainer.{new}", name) for _, new, _, name in NAMES}
    assert listed == {(m, n) for m, names in KEPT_FOR_MOVED_PATHS.items() for n in names}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("old", "new", "owner", "name"), NAMES)
def test_a_name_of_a_moved_module_comes_from_its_old_and_new_path(
    old: str, new: str, owner: str, name: str
) -> None:
    expected = getattr(importlib.import_module(f"melissa_trainer.{owner}"), name)
    sys.modules.pop(f"melissa_trainer.{old}", None)  # imported afresh: the warning again
    namespace: dict[str, object] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(f"from melissa_trainer.{old} import {name} as through_old", namespace)
    moved = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert any(f"melissa_trainer.{old} moved to melissa_trainer.{new}" in m for m in moved)
    assert namespace["through_old"] is expected
    exec(f"from melissa_trainer.{new} import {name} as through_new", namespace)
    assert namespace["through_new"] is expected
