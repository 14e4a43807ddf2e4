"""Shared fixtures: a clean Accelerate state per test, one torch thread; the number of
pytest-xdist workers that ``-n auto`` (pyproject's addopts) starts.

The test files are in folders that mirror the package (docs/concepts/architecture.md,
"Tests"); this file stays at the top of tests/: imported in pytest's default (prepend)
import mode, it puts tests/ on sys.path, so the shared helpers beside it (helpers.py,
slurm_cluster.py, ...) import by name from every folder."""

from __future__ import annotations

import os

import pytest
import torch

#: xdist workers per core for ``-n auto``. One: the suite is mostly CPU-bound (its
#: end-to-end tests train and start several processes each: ~1,180 CPU seconds), and
#: its tests' timeouts were set for one test at a time (two workers per core timed four
#: of them out on a 2-core machine that other work kept busy)
WORKERS_PER_CORE = 1


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: `WORKERS_PER_CORE` workers per core this process may run on (the
    affinity mask, not the machine's count, nor psutil's physical cores), at least 2."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(2, WORKERS_PER_CORE * (cores or 1))


@pytest.fixture(autouse=True)
def _fresh_accelerate_state():
    """Accelerate keeps process-wide singletons; each trainer test starts from scratch."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    torch.set_num_threads(1)
