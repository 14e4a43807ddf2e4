"""The modules' old import paths (before the packages by layer, issue 45) keep working
for one release: each gives the module at its new path, with a DeprecationWarning that
names both and points at the importing line; nothing of ours still uses them."""

from __future__ import annotations

import ast
import importlib
import io
import re
import subprocess
import sys
import tokenize
import warnings
from collections.abc import Iterator
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


#: lines that name an old path as data, not as an import: (file, text such a line holds).
#: The re-export checker's allow-list names this file's on-purpose old-path imports.
NAMED_AS_DATA = {("tests/project/test_reexports.py", '("tests/project/test_moved_paths.py", ')}


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
            if pattern.search(line) and not any(
                rel == file and text in line for file, text in NAMED_AS_DATA
            ):
                found.append(f"{rel}:{number}: {line.strip()}")
        if rel.endswith(".py"):  # ``from melissa_trainer import (..., moved, ...)``
            found += [f"{rel}:{n}: imports {old}" for n, old in old_names_imported(ast.parse(text))]
    assert not found, "old import paths still used:\n" + "\n".join(found)


# -- the old names in what people read: docstrings, comments, docs -----------------------

#: the package's modules now, relative dotted names (``core.state``, ``wire``)
CURRENT = {
    ".".join(path.relative_to(REPO / "melissa_trainer").with_suffix("").parts).removesuffix(
        ".__init__"
    )
    for path in (REPO / "melissa_trainer").rglob("*.py")
}


def _current(name: str) -> bool:
    """Whether `name` still names a module, whole or as the tail of one (``state``:
    `core.state`), so that a mention of it may be the new module's."""
    return any(module == name or module.endswith(f".{name}") for module in CURRENT)


#: old path (relative) -> new, for the moved modules whose old name can mean nothing
#: else: compound (``checkpoint_registry``, ``stream.protocol``) and no module's name now
COMPOUND = {
    old.removeprefix("melissa_trainer."): new.removeprefix("melissa_trainer.")
    for old, new in MOVED.items()
    if not _current(short := old.removeprefix("melissa_trainer."))
    and ("_" in short or "." in short)
}
#: the other moved modules that no module's name is now (``metrics``, ``sync``): plain
#: words, an old module only as ``metrics.evaluate``, a name the new module defines
WORDS = {
    old.removeprefix("melissa_trainer."): new
    for old, new in MOVED.items()
    if not _current(short := old.removeprefix("melissa_trainer.")) and short not in COMPOUND
}
_COMPOUND_RE = re.compile(
    "|".join(rf"(?<![\w.])(?:melissa_trainer\.)?{re.escape(old)}(?!\w)" for old in COMPOUND)
)
_WORDS_RE = re.compile("|".join(rf"(?<![\w.])({re.escape(old)})\.(\w+)" for old in WORDS))
#: what every match of the two patterns contains: a file without any of them has none (a
#: substring test, far cheaper than the patterns' lookbehinds and the tokenizer, which
#: then read only the few files that have one)
_NEEDLES = (*COMPOUND, *(f"{old}." for old in WORDS))


def may_name_an_old_module(text: str) -> bool:
    """False only where `old_module_names` finds nothing in `text` or any part of it."""
    return any(needle in text for needle in _NEEDLES)


def old_module_names(text: str) -> list[tuple[int, str]]:
    """(offset, name) of each old module name in `text` (prose: a docstring, a comment,
    a page), in order: each compound one, and each plain word followed by a name its new
    module defines."""
    found = [(match.start(), match.group(0)) for match in _COMPOUND_RE.finditer(text)]
    for match in _WORDS_RE.finditer(text):
        old, name = next(g for g in match.groups() if g), match.group(match.lastindex or 0)
        if not name.startswith("_") and hasattr(importlib.import_module(WORDS[old]), name):
            found.append((match.start(), f"{old}.{name}"))
    return sorted(found)


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of what people read in `path`: a Python file's comments and strings
    (docstrings among them), a page's paragraphs but those that name `DeprecationWarning`
    (the list of the moves, which names the old paths on purpose)."""
    text = path.read_text()
    if path.suffix == ".py":
        kinds = {tokenize.COMMENT, tokenize.STRING}
        if sys.version_info >= (3, 12):
            kinds.add(tokenize.FSTRING_MIDDLE)
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in kinds:
                yield token.start[0], token.string
        return
    start = 1
    for paragraph in re.split(r"(\n\s*\n)", text):
        if "DeprecationWarning" not in paragraph:
            yield start, paragraph
        start += paragraph.count("\n")


def test_the_checker_of_old_names_finds_them_and_only_them() -> None:
    assert {"checkpoint_registry", "trainer_checkpoint", "stream.protocol"} <= set(COMPOUND)
    assert {"metrics", "sync"} <= set(WORDS) and "state" not in WORDS | COMPOUND
    planted = (
        "loaded by `checkpoint_registry.load` (see melissa_trainer.checkpoint_reshard), "
        "``trainer_checkpoint``, the wire format (stream.protocol); `metrics.evaluate`"
    )
    assert may_name_an_old_module(planted)
    for _, name in old_module_names(planted):  # each one alone passes the file's filter
        assert may_name_an_old_module(f"x {name} y"), name
    assert [name for _, name in old_module_names(planted)] == [
        "checkpoint_registry",
        "melissa_trainer.checkpoint_reshard",
        "trainer_checkpoint",
        "stream.protocol",
        "metrics.evaluate",
    ]
    benign = (
        "`checkpoint.registry.load`, `trainer.checkpointing`, `melissa_trainer.wire`, "
        "the `metrics` dict, `metrics.get(name)`, `sync.result()`, `core.state`, "
        "simulation_loss_steps, `OnlineTrainer.simulation_losses`, `core.loss_guard`"
    )
    assert old_module_names(benign) == []


def test_no_old_module_name_in_docstrings_comments_or_docs() -> None:
    """Docstrings, comments and pages name the modules by their new paths (the moves:
    `MOVED`); only the shims' table and docs/concepts/architecture.md's list of the
    moves name the old ones."""
    roots = ["melissa_trainer", "docs", "examples", "benchmarks"]
    files = [REPO / "README.md"] + [
        path for root in roots for path in (REPO / root).rglob("*") if path.suffix in {".py", ".md"}
    ]
    found = [
        f"{path.relative_to(REPO)}:{line + text[:offset].count(chr(10))}: {name}"
        for path in files
        if path != REPO / "melissa_trainer" / "_moved.py"
        and may_name_an_old_module(path.read_text())
        for line, text in prose(path)
        for offset, name in old_module_names(text)
    ]
    assert not found, "old module names (see melissa_trainer/_moved.py):\n" + "\n".join(found)
