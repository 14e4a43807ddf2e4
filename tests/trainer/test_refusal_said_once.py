"""A start refused in a user's script (an earlier run's checkpoints in `output_dir`,
`train()` raising uncaught) ends with its message alone, one line, exit code 1: it came
wrapped in 16 lines of traceback through `train()` and the trainer's internals, which
buried it (user trial htrial7 F11). The error is still a `ConfigError` where the script
catches it (`tests/scripts/refused_start.py` records the class it caught).

One real process (no launcher: rank 0), the script a user would write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_fresh_start import make

from melissa_trainer import ConfigError

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SCRIPT = Path(__file__).parents[1] / "scripts" / "refused_start.py"


def test_a_refused_start_uncaught_prints_its_message_without_a_traceback(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make(out, max_steps=4).train()  # an earlier run's checkpoint-4: a fresh start is refused
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--output_dir", str(out), "--batch_size", "4",
         "--buffer", "fifo", "--buffer_size", "64", "--report_to", "none",
         "--disable_progress_bar"],
        capture_output=True, text=True, timeout=150, env=env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "holds checkpoints" in line]
    assert len(said) == 1 and said[0].startswith("ConfigError: "), proc.stderr[-3000:]
    caught = json.loads((out / "caught_0.json").read_text())
    assert caught["class"] == "ConfigError", caught


@pytest.mark.timeout(10)
def test_the_copy_said_once_is_the_same_error() -> None:
    from melissa_trainer.common.refusal import said_once

    error = ConfigError(["output_dir holds checkpoints"], context="start")
    said = said_once(error, 0)
    assert isinstance(said, ConfigError) and str(said) == str(error)
    assert said.problems == error.problems
    assert said.code == f"ConfigError: {error}"  # type: ignore[attr-defined]
    other = said_once(error, 1)  # (another rank: quiet, rank 0 said it)
    assert isinstance(other, ConfigError) and other.code == 1  # type: ignore[attr-defined]
