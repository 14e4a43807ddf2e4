"""The checkers of the package's structure that tests/project/test_architecture.py runs on the
package and tests/project/test_architecture_checkers.py on a package made to break them:
its modules and import graph (parsed with `ast`), import cycles, layers, and reaches into
private attributes (each module imported first in a fresh interpreter: import_first.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# -- the package's modules --------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str  # dotted
    path: Path
    is_package: bool  # an __init__.py

    @property
    def package(self) -> str:
        """The package its relative imports are relative to."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


def modules(root: Path, package: str) -> dict[str, Module]:
    """Every module of the package at `root` (named `package`), by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = Module(".".join(parts), path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` but those under ``if TYPE_CHECKING:`` (never run)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for node in child.orelse:
                yield node
                yield from runtime_nodes(node)
            continue
        yield child
        yield from runtime_nodes(child)


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: Module, known: dict[str, Module]) -> dict[str, int]:
    """The package's modules that `module` imports when run: name -> first line.

    ``from pkg import submodule`` is an import of the submodule only: `pkg` is imported
    first as any parent is, and a parent's ``__init__`` importing its submodules is not
    a cycle. ``from pkg import name`` with `name` defined by `pkg` imports `pkg`.
    """
    found: dict[str, int] = {}
    for node in runtime_nodes(ast.parse(module.path.read_text(), str(module.path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                target = sub if sub in known else source
                if target in known:
                    found.setdefault(target, node.lineno)
    found.pop(module.name, None)
    return found


def all_imports(module: Module, known: dict[str, Module]) -> dict[str, int]:
    """The package's modules that `module` names in any import, run or not (``if
    TYPE_CHECKING:`` included): name -> first line. Same resolution as `imports`."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(module.path.read_text(), str(module.path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                targets.append(sub if sub in known else source)
        for target in targets:
            if target in known and target != module.name:
                found.setdefault(target, node.lineno)
    return found


def layer_of(module: Module, package: str, layers: tuple[str, ...]) -> int | None:
    """The index of the layer `module` belongs to (`len(layers)` for the package itself
    and the modules at its root); None for a module in no layer (a package outside
    `layers`, or a module in one)."""
    parts = module.name.split(".")
    if len(parts) > 1 and parts[1] in layers:
        return layers.index(parts[1])
    if len(parts) == 1 or (len(parts) == 2 and not module.is_package):
        return len(layers)
    return None


def back_edges(
    known: dict[str, Module], package: str, layers: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """(each import of a higher layer, as "importer:line -> imported"; each module in no
    layer)."""
    edges, homeless = [], []
    for name, module in sorted(known.items()):
        here = layer_of(module, package, layers)
        if here is None:
            homeless.append(name)
            continue
        for target, line in sorted(all_imports(module, known).items()):
            there = layer_of(known[target], package, layers)
            if there is not None and there > here:
                above = layers[there] if there < len(layers) else "the root"
                edges.append(f"{name}:{line} -> {target} ({layers[here]} below {above})")
    return edges, homeless


def import_cycles(known: dict[str, Module]) -> list[list[str]]:
    """Each cycle of the import graph, as a closed path ``[a, b, ..., a]`` (one per
    strongly connected component of several modules, or a module importing itself)."""
    graph = {name: sorted(imports(m, known)) for name, m in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(component)

    for name in graph:
        if name not in index:
            connect(name)
    cycles = []
    for component in components:
        members = set(component)
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        start = min(component)
        path, seen = [start], {start}
        while True:  # walk inside the component until a module repeats: a cycle
            nxt = next(w for w in graph[path[-1]] if w in members)
            if nxt in seen:
                cycles.append([*path[path.index(nxt) :], nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return cycles


# -- private attributes -----------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_names(tree: ast.AST) -> set[str]:
    """Every name `tree` defines: functions, classes, assigned names, attributes of
    ``self`` / ``cls`` it sets, arguments."""
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store | ast.Del)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            defined.add(node.attr)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return defined


def _outside(owner: str, importer: str) -> bool:
    """Whether `importer` is outside the package `owner`."""
    return importer != owner and not importer.startswith(owner + ".")


def private_reaches(known: dict[str, Module], root: Path) -> list[tuple[str, str, int, str]]:
    """(file relative to `root`, private name, line, what) for each reach into another
    module's private attributes (see the module docstring)."""
    found = []
    for module in known.values():
        tree = ast.parse(module.path.read_text(), str(module.path))
        defined = _defined_names(tree)
        rel = module.path.relative_to(root).as_posix()

        def private_module(target: str, line: int, module: Module = module, rel: str = rel) -> None:
            parts = target.split(".")
            for i, part in enumerate(parts):
                if _private(part) and _outside(".".join(parts[:i]), module.name):
                    found.append((rel, part, line, f"imports the private module {target}"))

        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                if node.attr not in defined:
                    what = f"{ast.unparse(node.value)}.{node.attr}"
                    found.append((rel, node.attr, node.lineno, what))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))
                and node.args[1].value not in defined
            ):
                found.append((rel, node.args[1].value, node.lineno, ast.unparse(node)))
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, node)
                if source.split(".")[0] != known_root(known):
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in known:
                        private_module(sub, node.lineno)
                    else:
                        private_module(source, node.lineno)
                        if _private(alias.name):
                            what = f"from {source} import {alias.name}"
                            found.append((rel, alias.name, node.lineno, what))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known:
                        private_module(alias.name, node.lineno)
    return sorted(set(found))


def known_root(known: dict[str, Module]) -> str:
    return min(known, key=len).split(".")[0]
