"""Run alone by test_first_test_imports.py (not collected by the suite: no test_ prefix):
whether torch and accelerate were imported before this module was collected, i.e. before
any test's set-up, whose time its timeout counts."""

import sys

IMPORTED = sorted(m for m in ("torch", "accelerate.state") if m in sys.modules)


def test_heavy_imports_came_before_collection() -> None:
    assert IMPORTED == ["accelerate.state", "torch"], IMPORTED
