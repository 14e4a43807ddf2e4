"""``-n auto`` starts one xdist worker per core for the whole suite, whose end-to-end
tests are CPU-bound, and two per core for the inner tier alone (``-m "not e2e"``),
whose tests mostly wait (tests/conftest.py `pytest_xdist_auto_num_workers`)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import conftest
import pytest


def workers(markexpr: str) -> int:
    config: Any = SimpleNamespace(getoption=lambda name, default=None: markexpr)
    return conftest.pytest_xdist_auto_num_workers(config)


@pytest.mark.timeout(30)
def test_the_inner_tier_alone_gets_two_workers_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert workers("") == 3
    assert workers("e2e") == 3
    assert workers("not e2e and slow") == 3
    assert workers("not e2e") == 6
    assert workers("  not   e2e ") == 6
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert workers("") == 2  # (at least two)
