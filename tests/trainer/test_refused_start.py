"""A refused start under two real ranks (`accelerate launch --multi_gpu
--num_processes 2`, gloo on CPU) is said once: rank 0 prints the error, rank 1 exits
non-zero without printing it again (`melissa_trainer.common.refusal`). The oracle: the
error's text counted in the launch's whole output (two before the fix, one per rank),
and each rank's own record that it caught the refusal as a `ConfigError`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_fresh_start import make
from two_ranks import launch_two_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).parents[1] / "scripts" / "refused_start.py"


def test_a_start_refused_on_two_ranks_is_said_once_and_fails_both(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make(out, max_steps=4).train()  # an earlier run's checkpoint-4: a fresh start is refused
    proc = launch_two_ranks(
        SCRIPT, "--output_dir", str(out), "--batch_size", "4", "--buffer", "fifo",
        "--buffer_size", "64", "--report_to", "none", "--disable_progress_bar",
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    # every rank refused (and could catch it as the ConfigError it is) ...
    caught = [json.loads((out / f"caught_{r}.json").read_text()) for r in range(2)]
    assert [c["class"] for c in caught] == ["ConfigError", "ConfigError"], caught
    # ... and the error is printed once, by rank 0 (rank 1's copy exits quietly)
    assert output.count("holds checkpoints of an earlier run") == 1, output[-6000:]
    # (both quiet copies: rank 0's prints its message alone, test_refusal_said_once.py)
    assert [c["system_exit"] for c in caught] == [True, True]
