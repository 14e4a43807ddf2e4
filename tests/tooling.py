"""Tests that need a tool CI installs: skipped without it on a developer's machine,
failed without it under ``CI=true``.

`.ci/run` installs Slurm and munge (the one-node cluster of `slurm_cluster`), and
cmake, pkg-config, libzmq, gfortran and MPICH's compilers (the C/Fortran client and
the compiled examples, `compiled`); `pip install -e ".[test]"` adds the mpich wheel
(mpiexec, mpicc). There, a test that skips because one is missing would hide a broken
install behind "N skipped": under ``CI=true`` (set by GitHub Actions, GitLab CI and
most others) it fails instead, saying what is missing. Skips for other reasons (not
root, too few CPUs, another OS) stay skips. Every run prints why each test skipped
(``-rs`` in pyproject's addopts).
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "missing_tool"]


def in_ci() -> bool:
    """Whether this run is CI's: ``CI`` set to true, 1 or yes (any case)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing_tool(reason: str) -> NoReturn:
    """Skip the test for `reason` (a tool that CI installs is missing), or under
    ``CI=true`` fail it with that reason and where CI installs the tool."""
    if in_ci():
        pytest.fail(
            f"CI=true, and {reason}: .ci/run installs it (a skip here would hide the "
            "test); fix the CI image or its install step",
            pytrace=False,
        )
    pytest.skip(reason)
