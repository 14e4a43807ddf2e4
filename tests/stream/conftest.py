"""Fixtures of the stream tests: `server`, a started `PredictServer` on the serving tests'
`INPUTS` (``run_id="run-a"``, ``max_queue=4``, its rendezvous in ``tmp_path / "rv"``),
stopped at the end (test_serving_*.py); `named`, the HELLOs a receiver's connection
watch has named (a test that closes a connection after its HELLO waits on it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from named_hellos import named  # noqa: F401 (a fixture: pytest finds it by name here)
from predict_server import INPUTS

from melissa_trainer.stream.serving import PredictServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PredictServer]:
    srv = PredictServer(INPUTS, rendezvous_dir=tmp_path / "rv", run_id="run-a", max_queue=4)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
