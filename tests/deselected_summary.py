"""The summary line that says how many tests a ``-m`` expression deselected, for
tests/conftest.py (which imports its hooks). pytest's own "N deselected" is missing
under pytest-xdist: the workers collect and deselect, the controller, which prints the
summary, never hears of it, so ``pytest -m "not e2e" -n 2`` said "2800 passed" and
never that the end-to-end tier had not run (user trial htrial20).

Each worker counts what it deselects (`pytest_deselected`) into its ``workeroutput``,
which xdist sends to the controller when the worker ends (`pytest_testnodedown`); every
worker collects the whole suite, so their counts agree and the largest is the run's.
Without xdist the counting process is the one that prints.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["pytest_deselected", "pytest_terminal_summary", "pytest_testnodedown"]

#: tests deselected in this run, as this process knows it (a list: mutable module state)
_DESELECTED = [0]


def pytest_deselected(items: list[pytest.Item]) -> None:
    _DESELECTED[0] += len(items)
    config: Any = items[0].config if items else None
    if config is not None and hasattr(config, "workeroutput"):  # an xdist worker
        config.workeroutput["deselected"] = _DESELECTED[0]


@pytest.hookimpl(optionalhook=True)  # (xdist's hook: absent without xdist)
def pytest_testnodedown(node: Any, error: object) -> None:
    said = getattr(node, "workeroutput", {}).get("deselected", 0)
    _DESELECTED[0] = max(_DESELECTED[0], int(said))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line when a ``-m`` expression deselected tests (on the controller, or the
    only process): how many, by what, and that the README's command runs them all."""
    markexpr = config.option.markexpr
    count = _DESELECTED[0]
    if hasattr(config, "workerinput") or not markexpr or not count:
        return
    keyword = config.option.keyword
    by = f"-m {markexpr!r}" + (f" and -k {keyword!r}" if keyword else "")
    tier = " (the inner tier)" if markexpr.strip() == "not e2e" else ""
    tests = "test" if count == 1 else "tests"
    terminalreporter.write_line(
        f"{count} {tests} deselected by {by}{tier}; the README's test command runs them all"
    )
