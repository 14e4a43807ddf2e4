"""What the docs' python blocks name of the library exists.

`test_snippet_names.py` checks that every name a block reads is defined; this checks
what those names point to: every ``from melissa_trainer... import X`` of README.md and
docs/**/*.md imports, every keyword a block passes to one of the library's callables
(``OnlineTrainer(...)``, ``TrainingArguments(...)``, ``LauncherTuning(...)``, and a
method of an object a block built from one of them, ``trainer.load_checkpoint(...)``)
is a parameter of it, and every attribute a block reads of such an object (or of
``args``, the docs' name for the `TrainingArguments`) is one. A block names a page's
earlier imports and objects as the name check reads them: a page is one script.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterator
from typing import Any

import pytest

from melissa_trainer import TrainingArguments
from tests.docs.test_snippet_names import PAGES, Block, blocks


def imports(tree: ast.AST) -> Iterator[tuple[ast.ImportFrom, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("melissa_trainer"):
            for alias in node.names:
                yield node, alias.name


def resolve(module: str, name: str) -> Any:
    """`from module import name`, as Python does it (a submodule included)."""
    found = importlib.import_module(module)
    if hasattr(found, name):
        return getattr(found, name)
    return importlib.import_module(f"{module}.{name}")


def attributes_of(cls: type) -> set[str]:
    """The attributes an instance of `cls` has: its class's, its dataclass fields, and
    those its classes' sources assign on `self`."""
    names = set(dir(cls))
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    for klass in cls.__mro__:
        names |= set(getattr(klass, "__annotations__", {}))
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        names |= set(re.findall(r"\bself\.(\w+)\s*(?::[^=\n]*)?=(?!=)", source))
    return names


def keywords_refused(func: Any, call: ast.Call) -> list[str]:
    """The keywords of `call` that `func` has no parameter for (a dataclass: no field;
    `TrainingArguments.__init__` takes ``**values`` and hands them to its fields)."""
    if inspect.isclass(func) and dataclasses.is_dataclass(func):
        fields = {f.name for f in dataclasses.fields(func) if f.init}
        return [k.arg for k in call.keywords if k.arg is not None and k.arg not in fields]
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    kinds = {p.kind for p in signature.parameters.values()}
    if inspect.Parameter.VAR_KEYWORD in kinds:
        return []
    allowed = {
        name
        for name, p in signature.parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    return [k.arg for k in call.keywords if k.arg is not None and k.arg not in allowed]


def problems(page: str) -> Iterator[str]:
    """What the blocks of `page` name of the library that is not there."""
    known: dict[str, Any] = {}  # a name of the page -> the library's object it is
    instances: dict[str, type] = {"args": TrainingArguments}  # a name -> its class
    for block in blocks(page):
        tree = ast.parse(block.source)
        for each in ast.walk(tree):  # `import melissa_trainer.client`
            if isinstance(each, ast.Import):
                for alias in each.names:
                    if alias.name.split(".")[0] == "melissa_trainer":
                        try:
                            importlib.import_module(alias.name)
                        except ImportError as error:
                            yield f"{block}: import {alias.name}: {error}"
        for node, name in imports(tree):
            where = f"{block}: from {node.module} import {name}"
            try:
                found = resolve(str(node.module), name)
            except ImportError as error:
                yield f"{where}: {error}"
                continue
            known[next(a.asname or a.name for a in node.names if a.name == name)] = found
        yield from calls(block, tree, known, instances)


def calls(
    block: Block, tree: ast.AST, known: dict[str, Any], instances: dict[str, type]
) -> Iterator[str]:
    # what the block builds first: `trainer = OnlineTrainer(...)`, `with Client(...) as client`
    for node in ast.walk(tree):
        pairs: list[tuple[ast.expr | None, ast.expr]]
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.withitem):
            pairs = [(node.optional_vars, node.context_expr)]
        else:
            continue
        for target, value in pairs:
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and inspect.isclass(known.get(value.func.id))
            ):
                instances[target.id] = known[value.func.id]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func, label = None, ""
            if isinstance(node.func, ast.Name) and node.func.id in known:
                func, label = known[node.func.id], node.func.id
            elif (
                isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in instances
            ):
                cls = instances[node.func.value.id]
                func = getattr(cls, node.func.attr, None)
                label = f"{node.func.value.id}.{node.func.attr}"
            elif (
                isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and inspect.ismodule(known.get(node.func.value.id))
            ):
                func = getattr(known[node.func.value.id], node.func.attr, None)
                label = f"{node.func.value.id}.{node.func.attr}"
                if func is None:
                    yield f"{block}: {label} does not exist"
            if func is not None:
                for keyword in keywords_refused(func, node):
                    yield f"{block}: {label}(... {keyword}=...): no such parameter"
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in instances
            and node.attr not in attributes_of(instances[node.value.id])
        ):
            cls = instances[node.value.id]
            yield f"{block}: {node.value.id}.{node.attr}: {cls.__name__} has no such attribute"


def test_the_check_finds_a_field_that_does_not_exist(tmp_path: Any, monkeypatch: Any) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nfrom melissa_trainer import OnlineTrainer, TrainingArguments\n"
        "from melissa_trainer import NoSuchThing\n"
        "args = TrainingArguments(max_steps=3, max_step=3)\n"
        "trainer = OnlineTrainer(model, args, optimizer, train_source=s, hook=[])\n"
        "trainer.load_checkpoint('x', strict=True)\n"
        "args.output_dir, args.max_steps, args.batch, trainer.state, trainer.nothing\n"
        "import melissa_trainer.nowhere\nfrom melissa_trainer.client import Client\n"
        "with Client(fields={}, field=1) as client:\n    client.parameters, client.params\n```\n"
    )
    monkeypatch.setattr("tests.docs.test_snippet_names.ROOT", tmp_path)
    found = "\n".join(problems("page.md"))
    for wrong in (
        "NoSuchThing", "max_step=", "hook=", "strict=", "args.batch", "trainer.nothing",
        "field=", "client.params", "melissa_trainer.nowhere",
    ):  # fmt: skip
        assert wrong in found, (wrong, found)
    for right in (
        "max_steps=", "args.output_dir", "args.max_steps", "trainer.state", "fields=",
        "client.parameters",
    ):  # fmt: skip
        assert right not in found, (right, found)


@pytest.mark.parametrize("page", PAGES)
def test_what_the_blocks_name_of_the_library_exists(page: str) -> None:
    found = list(problems(page))
    assert not found, "\n".join(found)
