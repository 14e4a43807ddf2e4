"""The solver snippets a reader copies first name nothing they leave undefined.

README.md's "Usage" solver called ``solver.step()`` on a ``solver`` defined nowhere,
and the stream concept page did the same: copied as written, each stops at a
NameError. This test reads those blocks from the pages and checks, with the standard
library's parser, that every name a block reads is imported, assigned or a builtin.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: (page, a line that marks the block): the self-contained solver scripts
BLOCKS = [
    ("README.md", "# solver.py: started by the launcher"),
    ("docs/concepts/stream.md", "# simulation.py"),
    ("docs/how-to/own-solver.md", "# my_solver.py"),
]


def block(page: str, marker: str) -> str:
    """The first ```python block of `page` that holds `marker`."""
    for found in re.finditer(r"^```python\n(.*?)^```", (ROOT / page).read_text(), re.S | re.M):
        if marker in found.group(1):
            return found.group(1)
    raise AssertionError(f"{page}: no python block holds {marker!r}")


def undefined(source: str) -> set[str]:
    """The names `source` reads that it never binds (a flat script's check: a name
    bound anywhere in the script counts as bound everywhere)."""
    tree = ast.parse(source)
    bound = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound


def test_the_check_finds_an_undefined_name() -> None:
    assert undefined("import numpy as np\nx = np.zeros(2)\nsolver.step(x)\n") == {"solver"}
    assert undefined("def f(u):\n    return u\nf(1)\n") == set()


@pytest.mark.parametrize(("page", "marker"), BLOCKS)
def test_the_solver_snippet_defines_every_name_it_reads(page: str, marker: str) -> None:
    assert undefined(block(page, marker)) == set(), page
