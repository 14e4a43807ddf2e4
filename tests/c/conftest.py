"""Fixtures of the C client's tests, for every file here: `c_client` (the client, built
once per run: tests/compiled.py), `script_exe` (mt_script, compiled per module:
tests/c_driver.py), `zctx` and `sink` (a ZeroMQ context, and a PULL endpoint for the
stream a client must start: predict_script.py), and `c_predict`, mt_scripts that ask for
predictions (predict_runs.py). A file that imports one of these by name uses its own
import (the same fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_runs import CPredict
from predict_script import sink, zctx  # noqa: F401 (fixtures)


@pytest.fixture
def c_predict(script_exe: Path, sink: str) -> CPredict:  # noqa: F811
    """mt_scripts of this test asking for predictions (`CPredict`), their stream to
    `sink`."""
    return CPredict(script_exe, sink)
