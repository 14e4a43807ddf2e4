"""One owner per name: no re-export shims (tests/project/reexport_checks.py says what it
finds). A module that moved a name out does not keep it importable from where it was;
every importer (the package, tests, examples, benchmarks, docs' Python files) imports a
name from the module that defines it. Only the public API re-exports, each entry of
`PUBLIC` saying where it is documented or who imports it; `PENDING` lists what another
change in flight owns, and shrinks.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from architecture_checks import modules
from reexport_checks import Reexport, reexports

import melissa_trainer

PACKAGE_DIR = Path(melissa_trainer.__file__).parent
REPO = PACKAGE_DIR.parent
PACKAGE = "melissa_trainer"

#: the modules that may re-export: the package's public API and its documented entry
#: points (each a package's face: `__init__`, whose names its users import)
PUBLIC: dict[str, str] = {
    "melissa_trainer": "the API: `from melissa_trainer import OnlineTrainer` (README.md)",
    "melissa_trainer.buffers": "docs/reference/api/buffers.md (`::: melissa_trainer.buffers`)",
    "melissa_trainer.checkpoint": "docs/resume.md (`from melissa_trainer.checkpoint import`)",
    "melissa_trainer.client": "the simulation side's API: docs/how-to/own-solver.md",
    "melissa_trainer.hooks": "docs/reference/api/hooks.md (`::: melissa_trainer.hooks`)",
    "melissa_trainer.launcher": "docs/reference/api/launcher.md, docs/concepts/study.md",
    # the layers' faces that the root's lazy names (`_MODULES`) and the tests import
    "melissa_trainer.study": "`Study` (the root's `_MODULES`)",
    "melissa_trainer.trainer": "`OnlineTrainer`, after `launcher_watch.arm()` runs first",
    "melissa_trainer.wire": "the protocol's names, lazily (its docstring; docs/protocol.md)",
    "melissa_trainer.launcher.backends": "docs/reference/api/launcher.md (`make_backend`)",
    "melissa_trainer.launcher.backends.slurm": "`SlurmBackend` (`make_backend`, the tests)",
    "melissa_trainer.sources": "`Source`, `IterableSource` (the root's `_MODULES`)",
    # `python -m melissa_trainer.lineage check` and `melissa_trainer.lineage.check(...)`
    # (docs/how-to/preemption.md, docs/how-to/hooks.md)
    "melissa_trainer.lineage": "the ledger checker's entry point",
}

#: what another change in flight owns, left as it is (remove each entry once it is merged
#: and imports from the owners). Modules that re-export (and their importers):
PENDING_MODULES: dict[str, str] = {}
#: imports through a module that does not own the name: (file, name)
PENDING_IMPORTS: set[tuple[str, str]] = set()

#: imports in strings (code a test runs in a subprocess or execs) that fail, or go through
#: an old path, on purpose: (file, name) -> what the file tests with it
ON_PURPOSE_IN_STRINGS: dict[tuple[str, str], str] = {
    ("tests/trainer/test_hf_class_imports.py", "nonsense"): "a missing name's ImportError",
    ("tests/project/test_moved_paths.py", "melissa_trainer.arguments"): "an old path's warning",
    ("tests/project/test_moved_paths.py", "melissa_trainer.sync"): "an old path's warning",
}

#: names importable from an old path when issue 45 moved it (an old path gives the module
#: at its new path, `_moved.MOVED`, and ``from <old path> import ConfigError`` worked before
#: the move): each module re-exports these, and only these, as ``X as X``; they go with
#: _moved.py. Importers of ours still import them from the owners.
KEPT_FOR_MOVED_PATHS: dict[str, set[str]] = {
    "melissa_trainer.config.arguments": {
        "ARGS_FILE", "ConfigError", "ConversionError", "FALSE_WORDS", "NONE_WORDS",
        "TRUE_WORDS", "UnknownArgumentError", "convert_value", "load_config_file",
        "unknown_key_problems", "unwrap_optional",
    },
    "melissa_trainer.config.parser": {"str_to_bool"},
    "melissa_trainer.core.state": {"TrainerControl"},
    "melissa_trainer.core.dataset": {
        "PENDING_ARRAYS", "PENDING_FILES", "PENDING_META", "RECENT_ARRAYS", "read_pending",
        "simulation_ids",
    },
    "melissa_trainer.core.loss_per_simulation": {
        "DEFAULT_SIMULATION_LOSS_STEPS", "resolve_loss_steps",
    },
    "melissa_trainer.checkpoint.registry": {"FORMAT_FILE", "FORMAT_VERSION"},
    "melissa_trainer.trainer.preemption": {"Preempted", "launcher_parent"},
    # (its other names of then, `LOCK_FILE`, `Holder`, `OutputDirLocked`, it reads itself)
    "melissa_trainer.trainer.output_lock": {"ENV_OUTPUT_LOCK"},
}  # fmt: skip

#: the Python files outside the package that import from it
IMPORTERS = ("tests", "examples", "benchmarks", "docs")


def importer_files() -> list[Path]:
    return sorted(p for top in IMPORTERS for p in (REPO / top).rglob("*.py"))


@pytest.mark.timeout(120)
def test_no_module_re_exports_a_name_and_importers_import_from_owners() -> None:
    known = modules(PACKAGE_DIR, PACKAGE)
    found = reexports(known, importer_files(), PUBLIC)
    where = {(f.path.relative_to(REPO).as_posix(), f.name) for f in found}

    def in_owner(f: Reexport) -> bool:  # (a string may name a module that does not exist)
        return f.module in known and f.path == known[f.module].path

    # a kept name counts only where its module re-exports it (not an import through it)
    kept = {(f.module, f.name) for f in found if in_owner(f)}
    kept &= {(module, name) for module, names in KEPT_FOR_MOVED_PATHS.items() for name in names}
    new = [
        f
        for f in found
        if f.module not in PENDING_MODULES
        and (f.path.relative_to(REPO).as_posix(), f.name) not in PENDING_IMPORTS
        and (f.path.relative_to(REPO).as_posix(), f.name) not in ON_PURPOSE_IN_STRINGS
        and not (in_owner(f) and (f.module, f.name) in kept)
    ]
    assert not new, "re-exports (import each name from its owner, drop the shim):\n" + "\n".join(
        f.describe(REPO) for f in new
    )
    stale = (PENDING_IMPORTS - where) | (PENDING_MODULES.keys() - {f.module for f in found})
    stale |= ON_PURPOSE_IN_STRINGS.keys() - where
    assert not stale, f"no longer found, remove from PENDING_*, ON_PURPOSE_*: {sorted(stale)}"
    stale_kept = sorted(
        (module, name)
        for module, names in KEPT_FOR_MOVED_PATHS.items()
        for name in names
        if (module, name) not in kept
    )
    assert not stale_kept, f"no longer re-exported, remove from KEPT_FOR_MOVED_PATHS: {stale_kept}"
    assert set(PUBLIC) <= set(known), sorted(set(PUBLIC) - set(known))


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "fake"
    for rel, source in {"__init__.py": "", **files}.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return package


@pytest.mark.timeout(60)
def test_the_checker_finds_each_kind_of_re_export(tmp_path: Path) -> None:
    """A package made to break the rule each way (and to keep it in the ways that look
    alike: a name read by a string annotation or a cast, a package's face allowed)."""
    package = write_package(
        tmp_path,
        {
            "owner.py": "X = 1\nY = 2\nZ = 3\nclass T: ...\n",
            # X: never read (kept for others); Y: read, but also listed in __all__
            "shim.py": """\
                from typing import cast
                from fake.owner import X, Y
                from fake.owner import Z as Z
                from fake.owner import T
                __all__ = ["Y", "own"]
                own = Y
                def f(t: "T") -> None:
                    cast("T", t)
                """,
            # through a module that uses Y but does not own it
            "user.py": "from fake.shim import Y, own\nfrom fake.owner import X\nprint(X, Y, own)\n",
            "face/__init__.py": "from fake.owner import X\n__all__ = ['X']\n",
        },
    )
    outside = tmp_path / "test_outside.py"
    outside.write_text("from fake.shim import own\nfrom fake.shim import X\n")
    found = reexports(modules(package, "fake"), [outside], ["fake.face"])
    got = sorted((f.path.name, f.name, f.why.split(" ")[0]) for f in found)
    assert got == [
        ("shim.py", "X", "imported"),  # never read
        ("shim.py", "Y", "fake.shim.__all__"),  # listed in __all__
        ("shim.py", "Z", "imported"),  # `Z as Z`: never read
        ("test_outside.py", "X", "imported"),  # through the shim, from outside
        ("user.py", "Y", "imported"),  # through the shim, in the package
    ], got


@pytest.mark.timeout(60)
def test_the_checker_reads_code_held_in_strings(tmp_path: Path) -> None:
    """Code in a test's strings (a solver script run in a subprocess) imports names that
    do not exist, or through a module that does not own them: each found, with its line
    in the file; strings that are not code, f-strings and right imports are not."""
    package = write_package(
        tmp_path,
        {
            "owner.py": "X = 1\n",
            "user.py": "from fake.owner import X\nprint(X)\n",
            "face/__init__.py": "from fake.owner import X\n__all__ = ['X', 'LAZY']\n",
        },
    )
    outside = tmp_path / "test_outside.py"
    outside.write_text(
        textwrap.dedent(
            '''\
            SOLVER = """
                import sys
                from fake.owner import X, Gone
                from fake.user import X
                from fake.face import X, LAZY, Nowhere
                from fake import *
                import fake.owner, fake.missing
                INNER = \'from fake.owner import Deeper\'
            """
            PROSE = "fake: import what you need from fake.owner"
            TEMPLATE = f"from fake.owner import {SOLVER}"
            BROKEN = "from fake.owner import ("
            '''
        )
    )
    found = reexports(modules(package, "fake"), [outside], ["fake.face"])
    got = sorted((f.line, f.name, f.why.split(": ")[1].split(",")[0]) for f in found)
    assert got == [
        (3, "Gone", "imported from fake.owner"),  # (does not exist)
        (4, "X", "imported from fake.user"),  # (exists there, not its owner)
        (5, "Nowhere", "imported from fake.face"),  # (a face: not bound there)
        (7, "fake.missing", "no module fake.missing"),
        (8, "Deeper", "imported from fake.owner"),  # (a string in the string)
    ], got
