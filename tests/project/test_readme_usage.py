"""README.md's "Usage" pair runs as printed: its solver.py, started by its train.py's
launcher, streams samples that the trainer trains on. Only the study's size changes
(4 simulations, 2 at a time, instead of 500 and 8) and the run stops at step 8.

Before 2026-12-04 the solver called ``solver.step()`` on a ``solver`` defined nowhere:
every simulation failed with a NameError.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # it starts the trainer and its simulations

README = Path(__file__).resolve().parents[2] / "README.md"


def usage_block(first_line: str) -> str:
    """The README's python block that starts with `first_line`."""
    for body in re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M):
        if body.startswith(first_line):
            return str(body)
    raise AssertionError(f"README.md: no python block starts with {first_line!r}")


@pytest.mark.timeout(240)
def test_the_readme_solver_and_trainer_run_as_printed(tmp_path: Path) -> None:
    (tmp_path / "solver.py").write_text(usage_block("# solver.py"))
    train = usage_block("# train.py")
    for printed, small in (
        ("n_simulations=500", "n_simulations=4"),
        ("job_limit=8", "job_limit=2"),
    ):
        assert printed in train, printed
        train = train.replace(printed, small)
    (tmp_path / "train.py").write_text(train)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "train.py", "--max_steps", "8", "--output_dir", str(out),
         "--disable_progress_bar"],
        capture_output=True, text=True, timeout=220, cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "NameError" not in proc.stdout + proc.stderr
    (checkpoint,) = (out / "checkpoints").glob("checkpoint-*")  # saved at the end
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["global_step"] == 8
    # the samples came from the solvers, none of which failed: the trainer's last log
    logs = [h for h in state["log_history"] if "source_samples_put" in h]
    assert logs, state["log_history"]
    assert logs[-1]["source_samples_put"] > 0 and logs[-1]["source_launcher_failed"] == 0
