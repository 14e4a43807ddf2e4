"""The checker of the package's "one owner per name" rule that tests/project/test_reexports.py
runs on the package (and on a package made to break it): a module that moved a name out
does not re-export it, and every importer imports a name from the module that defines it.

Three findings, each a `Reexport`:

* a name a module imports (at module level, ``if TYPE_CHECKING:`` included) and never
  reads: it is there only for others to import it from there (``from m import X as X``,
  an ``# noqa: F401``, or ``__all__``, which ruff takes as a re-export);
* ``__all__`` listing a name the module imports rather than defines;
* ``from m import X`` (in the package, its tests, examples, benchmarks or docs' Python
  files) where `m` is a module of the package that does not define `X` (a name of another
  module that `m` imports for its own use): import it from its owner.

The third is also looked for in the Python code that files hold in strings (a test's
solver script, run in a subprocess, where a wrong import fails only at run time): each
string constant naming the package that parses as Python once dedented (and the strings
inside it), with two more findings there: ``import m`` / ``from m import X`` of a
module `m` of the package that does not exist, and ``from f import X`` of a package's
face `f` that binds no `X` (neither defines, imports, lists in ``__all__`` nor has a
submodule `X`).

A package's ``__init__`` re-exports only where the caller allows it (the public API).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from architecture_checks import Module


@dataclass(frozen=True)
class Reexport:
    path: Path  # the file where it is
    line: int
    name: str
    module: str  # the module the name is re-exported from (or imported through)
    why: str

    def describe(self, root: Path) -> str:
        return f"{self.path.relative_to(root).as_posix()}:{self.line}: {self.name} ({self.why})"


def _resolve(package: str | None, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    if package is None:  # a relative import outside the package: not ours
        return ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run when the module is imported (or type-checked): `body`, and the
    bodies of its ``if`` / ``try`` blocks (``if TYPE_CHECKING:`` included), not functions'
    or classes'."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from module_level(node.body)
            yield from module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from module_level(block)
            for handler in node.handlers:
                yield from module_level(handler.body)


def defined_names(tree: ast.Module) -> set[str]:
    """The names a module binds at module level other than by importing them."""
    found: set[str] = set()
    for node in module_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif not isinstance(node, ast.If | ast.Try | ast.Import | ast.ImportFrom):
            for child in ast.walk(node):
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    found.add(child.id)
    return found


def _names_in_strings(nodes: Iterable[ast.AST]) -> set[str]:
    """The names read by string annotations and ``cast("T", x)`` among `nodes`."""
    found: set[str] = set()
    for node in nodes:
        for child in ast.walk(node):
            if isinstance(child, ast.Constant) and isinstance(child.value, str):
                try:
                    parsed = ast.parse(child.value, mode="eval")
                except SyntaxError:
                    continue
                found |= {n.id for n in ast.walk(parsed) if isinstance(n, ast.Name)}
    return found


def read_names(tree: ast.Module, imports: list[ast.ImportFrom]) -> set[str]:
    """Every name `tree` reads outside its `imports`: names, string annotations, casts."""
    skip = {id(n) for node in imports for n in ast.walk(node)}
    found: set[str] = set()
    strings: list[ast.AST] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Name):
            found.add(node.id)
        if isinstance(node, ast.arg) and node.annotation:
            strings.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            strings.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            strings.append(node.annotation)
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("cast", "typing.cast"):
            strings.extend(node.args[:1])
    return found | _names_in_strings(strings)


def all_names(tree: ast.Module) -> dict[str, int]:
    """The names of the module's ``__all__`` (name -> line); {} without one."""
    for node in tree.body:
        targets: list[ast.expr]
        value: ast.expr | None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        listed = any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
        if listed and isinstance(value, ast.List | ast.Tuple):
            return {
                e.value: e.lineno
                for e in value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return {}


def reexports(
    known: dict[str, Module], importers: Iterable[Path], allowed: Iterable[str]
) -> list[Reexport]:
    """Each re-export of the package's modules (`known`) but those of the modules in
    `allowed`, and each import through a module that does not own the name in the
    package's files and in `importers` (Python files outside it)."""
    allowed = set(allowed)
    trees = {name: ast.parse(m.path.read_text(), str(m.path)) for name, m in known.items()}
    defined = {name: defined_names(tree) for name, tree in trees.items()}
    found: list[Reexport] = []
    for name, module in sorted(known.items()):
        if name in allowed:
            continue
        tree = trees[name]
        imports = [
            n
            for n in module_level(tree.body)
            if isinstance(n, ast.ImportFrom) and n.module != "__future__"
        ]
        read = read_names(tree, imports)
        imported = {}
        for node in imports:
            for alias in node.names:
                bound = alias.asname or alias.name
                imported[bound] = node.lineno
                if bound not in read and bound not in defined[name]:
                    why = f"imported into {name} only to be imported from it"
                    found.append(Reexport(module.path, node.lineno, bound, name, why))
        for listed, line in all_names(tree).items():
            if listed in imported and listed not in defined[name]:
                why = f"{name}.__all__ lists a name it imports"
                found.append(Reexport(module.path, line, listed, name, why))
    owners = {n for n, m in known.items() if not m.is_package and n not in allowed}
    files = [(m.path, m.package) for m in known.values()] + [(p, None) for p in importers]
    for path, package in files:
        tree = ast.parse(path.read_text(), str(path))
        for child in ast.walk(tree):
            if not isinstance(child, ast.ImportFrom):
                continue
            source = _resolve(package, child)
            if source not in owners:
                continue
            for alias in child.names:
                if alias.name not in defined[source] and f"{source}.{alias.name}" not in known:
                    why = f"imported from {source}, which does not define it"
                    found.append(Reexport(path, child.lineno, alias.name, source, why))
        found += _string_imports(path, tree, known, trees, defined, owners)
    return found


def code_in_strings(tree: ast.AST, word: str, line: int = 1) -> Iterator[tuple[int, ast.Module]]:
    """Each string constant of `tree` holding `word` that parses as Python once dedented,
    with the line of the file it starts on (`tree`'s first line is `line`), and the
    strings inside those, in turn. f-strings are left out: their holes are not code."""
    in_fstrings = {
        id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
        for part in ast.walk(node)
    }  # fmt: skip
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and word in node.value
            and id(node) not in in_fstrings
        ):
            try:
                code = ast.parse(textwrap.dedent(node.value))
            except (SyntaxError, ValueError):  # (prose, a template; ValueError: a NUL)
                continue
            at = line + node.lineno - 1
            yield at, code
            yield from code_in_strings(code, word, at)


def _face_binds(tree: ast.Module, defined: set[str]) -> set[str]:
    """The names a package's face binds: defined, imported at module level, or listed in
    ``__all__`` (lazy names, given by a module ``__getattr__``)."""
    imported = {
        alias.asname or alias.name.partition(".")[0]
        for node in module_level(tree.body)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    return defined | imported | set(all_names(tree))


def _string_imports(
    path: Path,
    tree: ast.Module,
    known: dict[str, Module],
    trees: dict[str, ast.Module],
    defined: dict[str, set[str]],
    owners: set[str],
) -> list[Reexport]:
    """`reexports`' findings in the code `tree` holds in strings (`code_in_strings`)."""
    root = next(iter(known)).partition(".")[0]
    found: list[Reexport] = []
    for line, code in code_in_strings(tree, root):
        for node in ast.walk(code):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.partition(".")[0] == root and alias.name not in known:
                        why = f"in a string: no module {alias.name}"
                        at = line + node.lineno - 1
                        found.append(Reexport(path, at, alias.name, alias.name, why))
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            source, at = node.module, line + node.lineno - 1
            if source.partition(".")[0] != root:
                continue
            if source not in known:
                why = f"in a string: no module {source}"
                found.append(Reexport(path, at, source, source, why))
                continue
            if source in owners:
                binds, does = defined[source], "does not define it"
            else:
                binds, does = _face_binds(trees[source], defined[source]), "has no such name"
            for alias in node.names:
                if alias.name == "*":  # (whatever it binds exists)
                    continue
                if alias.name not in binds and f"{source}.{alias.name}" not in known:
                    why = f"in a string: imported from {source}, which {does}"
                    found.append(Reexport(path, at, alias.name, source, why))
    return found
