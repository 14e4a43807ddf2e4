"""The test processes keep a bytecode cache even under ``PYTHONDONTWRITEBYTECODE``
(tests/conftest.py, `_cache_bytecode_outside_the_tree`), outside the source tree.

This project's machines set the variable: every pytest-xdist worker compiled the package
and assertion-rewrote every test module afresh at each run, 14.5 CPU-s of collection per
worker where a cache makes it 5 (the inner tier's ~118 CPU-s held two such collections).
Failed before under ``PYTHONDONTWRITEBYTECODE=1``: no ``.pyc`` of the package, nor of
this module's rewrite, was written anywhere."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

import melissa_trainer

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(30)
def test_the_package_s_bytecode_is_cached() -> None:
    cached = importlib.util.cache_from_source(melissa_trainer.__file__)
    assert Path(cached).is_file(), f"no bytecode cached for the package at {cached}"


@pytest.mark.timeout(30)
def test_the_rewritten_test_modules_are_cached() -> None:
    if type(__loader__).__name__ != "AssertionRewritingHook":  # (--assert=plain)
        pytest.skip("pytest rewrites no assertion here")
    folder = Path(importlib.util.cache_from_source(__file__)).parent
    rewritten = list(
        folder.glob(f"{Path(__file__).stem}.{sys.implementation.cache_tag}-pytest-*.pyc")
    )
    assert rewritten, f"pytest kept no rewrite of this module in {folder}"


@pytest.mark.timeout(30)
def test_under_the_variable_nothing_is_written_beside_the_sources() -> None:
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        pytest.skip("PYTHONDONTWRITEBYTECODE is not set: the caches are beside the sources")
    assert sys.pycache_prefix is not None
    assert not Path(sys.pycache_prefix).resolve().is_relative_to(ROOT), sys.pycache_prefix
