"""tests/conftest.py imports no heavy module at its top: pytest-xdist's controller loads
it too, runs no test, and paid torch's import (~0.9 CPU-s, and as much of the wall time
before it started the workers) for a fixture that only the workers run. Failed before
(``import torch`` at the top)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
#: modules a test process imports anyway, not the controller
HEAVY = frozenset({"torch", "accelerate", "transformers", "numpy", "scipy", "zmq"})


@pytest.mark.timeout(30)
def test_conftest_imports_nothing_heavy_at_its_top() -> None:
    tree = ast.parse(CONFTEST.read_text())
    top: set[str] = set()
    for node in tree.body:  # (module level only: a fixture's own imports are the workers')
        if isinstance(node, ast.Import):
            top |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            top.add(node.module.split(".")[0])
    assert not top & HEAVY, sorted(top & HEAVY)
