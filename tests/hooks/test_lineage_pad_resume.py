"""`SampleLedger` across a resume from a checkpoint written while a rank pads with a
padding batch still pending: the resumed run marks that batch as padding, as the run
would have, so the checker passes (no false duplicates).

Two ranks (gloo on CPU), rank 0's stream `SHORT` batches, rank 1's `LONG`
(tests/hooks/lineage_ranks_driver.py). With ``--stop_sync_steps 2`` the windows are
steps 1, 2, 3-4, 5-6, 7-8, 9: rank 0's data ends at step 3, and at the start of the
window 5-6 it pads two batches; the checkpoint of step `SAVE` (5) then holds the padding
batch of step 6 pending. The first run goes on to the end; the second resumes from that
checkpoint and trains steps 6-9 again (the first run's are discarded by the resume rule).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from process_tree import run_group

from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.lineage import check, read_runs

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(480)]

DRIVER = Path(__file__).with_name("lineage_ranks_driver.py")
BATCH, SHORT, LONG = 4, 3, 9
SAVE = 5  # mid-window (5-6), after rank 0's data ended at step SHORT


def launch(out: Path, *extra: str) -> None:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(held_port()), str(DRIVER), "--output_dir", str(out),
           "--batch_size", str(BATCH), "--buffer", "fifo", "--buffer_size", "16",
           "--report_to", "none", "--disable_progress_bar", "--save_at_end", "false",
           "--save_steps", str(SAVE), "--stop_sync_steps", "2",
           "--short", str(SHORT), "--long", str(LONG), *extra]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(Path(__file__).parents[2])}  # fmt: skip
    proc = run_group(cmd, timeout=220, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_resume_from_a_checkpoint_with_padding_pending_keeps_it_marked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    launch(out)
    latest = latest_checkpoint(out / "checkpoints")
    assert latest is not None and latest.name.endswith(f"-{SAVE}"), latest
    launch(out, "--resume_from_checkpoint", "latest")

    report = check(out, simulations=4)
    assert report.ok and not report.duplicates, str(report)  # (before: step 6's, as duplicates)
    padded = (LONG - SHORT) * BATCH  # the kept records: steps 4-5 of run 1, 6-9 of run 2
    assert f"not counted: {padded} padding draws" in str(report)
    first, resumed = read_runs(out)
    assert (first.start_step, first.end_step) == (0, LONG)
    assert (resumed.start_step, resumed.end_step) == (SAVE, LONG)
    # rank 0 pads from step SHORT + 1 on, in both runs; step SAVE + 1's batch was the
    # checkpoint's pending padding batch
    for run, start in ((first, 0), (resumed, SAVE)):
        pads = [(step, rank) for step, _, pad, rank, _ in run.records if pad]
        assert pads == [(step, 0) for step in range(max(SHORT, start) + 1, LONG + 1)]
