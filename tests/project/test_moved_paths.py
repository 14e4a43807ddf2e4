"""The modules' old import paths (before the packages by layer, issue 45) keep working
for one release: each gives the module at its new path, with a DeprecationWarning that
names both and points at the importing line; nothing of ours still uses them."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import melissa_trainer
from melissa_trainer._moved import MOVED

REPO = Path(melissa_trainer.__file__).parent.parent


def forget(name: str) -> None:
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_the_new_module_with_a_warning(old: str) -> None:
    new = MOVED[old]
    module = importlib.import_module(new)
    forget(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        aliased = importlib.import_module(old)
    assert aliased is module
    assert old not in MOVED.values() and not (REPO / (old.replace(".", "/") + ".py")).exists()
    messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert any(f"{old} moved to {new}" in m for m in messages), messages


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_warning_points_at_the_importing_line(tmp_path: Path) -> None:
    """Shown by Python's default filters in a user's script (attributed to __main__)."""
    script = tmp_path / "user.py"
    script.write_text(
        "import melissa_trainer.arguments as a\nfrom melissa_trainer.sync import StopSync\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=50)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"{script}:1: DeprecationWarning: melissa_trainer.arguments moved to " \
        "melissa_trainer.config.arguments" in result.stderr  # fmt: skip
    assert f"{script}:2: DeprecationWarning: melissa_trainer.sync moved to" in result.stderr


@pytest.mark.timeout(60)
def test_attribute_access_on_the_package_follows_the_move() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert melissa_trainer.loss_guard is importlib.import_module(
            "melissa_trainer.core.loss_guard"
        )
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        melissa_trainer.nothing_here  # noqa: B018


def old_names_imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, old path) for each ``from package import module`` of a moved module in
    `tree` (the dotted form is what the text search finds)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MOVED:
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
    return found


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_nothing_of_ours_uses_an_old_path() -> None:
    pattern = re.compile("|".join(rf"\b{re.escape(old)}\b" for old in MOVED))
    skip = {"melissa_trainer/_moved.py", "tests/project/test_moved_paths.py"}
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()  # fmt: skip
    found = []
    for rel in tracked:
        if rel in skip or not rel.endswith((".py", ".md", ".yml", ".toml")):
            continue
        text = (REPO / rel).read_text()
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
        if rel.endswith(".py"):  # ``from melissa_trainer import (..., moved, ...)``
            found += [f"{rel}:{n}: imports {old}" for n, old in old_names_imported(ast.parse(text))]
    assert not found, "old import paths still used:\n" + "\n".join(found)
