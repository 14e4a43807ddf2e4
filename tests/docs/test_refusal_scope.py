"""A page's `refusals_end_the_program()` covers the line that makes the trainer.

README.md's "Usage" made `OnlineTrainer(...)` before the `with refusals_end_the_program():`
that wrapped `trainer.train()` alone, under a comment promising "a refused start (output_dir
in use...): one line, status 2". The trainer claims `output_dir` when it is made
(`tests/checkpoint/test_output_lock.py`), so a second run on the same directory, copied
from the README, ended in a traceback and exit status 1 (htrial48, running the README's
script twice on one --output_dir). This test reads every ```python block of README.md and
docs/ that uses `refusals_end_the_program` and checks that each `OnlineTrainer(...)` it
makes is inside such a `with`.
"""

from __future__ import annotations

import ast

import pytest
from test_snippet_names import PAGES, blocks

pytestmark = pytest.mark.timeout(60)


def _is_refusals(item: ast.withitem) -> bool:
    call = item.context_expr
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "refusals_end_the_program"
    )


def _trainers_outside(tree: ast.AST) -> list[int]:
    """Lines of `OnlineTrainer(...)` calls not inside a `with refusals_end_the_program()`."""
    covered: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(_is_refusals(i) for i in node.items):
            covered |= {id(n) for n in ast.walk(node)}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "OnlineTrainer"
        and id(node) not in covered
    ]


def test_every_trainer_made_under_the_refusals_it_promises() -> None:
    wrong = []
    for page in PAGES:
        for block in blocks(page):
            if "refusals_end_the_program()" not in block.source:
                continue
            tree = ast.parse(block.source)
            wrong += [f"{block} (block line {line})" for line in _trainers_outside(tree)]
    assert not wrong, (
        "OnlineTrainer(...) made outside `with refusals_end_the_program():` in a block that "
        "uses it: the trainer claims output_dir when made, so a refused start there is a "
        f"traceback, not the one line promised: {wrong}"
    )


def test_the_check_sees_a_trainer_made_outside() -> None:
    # (the shape README.md had: the check must catch it)
    source = (
        "trainer = OnlineTrainer(model, args)\n"
        "with refusals_end_the_program():\n"
        "    trainer.train()\n"
    )
    assert _trainers_outside(ast.parse(source)) == [1]
    inside = "with refusals_end_the_program():\n    OnlineTrainer(model, args).train()\n"
    assert _trainers_outside(ast.parse(inside)) == []
