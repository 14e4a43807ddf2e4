"""Two ranks (gloo on CPU): study-level telemetry is logged once, not summed over ranks,
and each rank's `samples_seen` survives a resume (not rank 0's for every rank)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from process_tree import run_group

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).parents[1] / "scripts" / "rank_counters.py"


def launch(out: Path, *flags: str) -> str:
    """Run the script on two ranks; returns its output (stdout and stderr)."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [
        accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(held_port()), str(SCRIPT),
        "--output_dir", str(out), "--batch_size", "8", "--buffer", "fifo", "--buffer_size", "16",
        "--report_to", "none", "--disable_progress_bar", "--logging_steps", "4",
        "--stop_sync_steps", "4", "--save_steps", "5", *flags,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def results(out: Path, prefix: str = "") -> list[dict]:
    found = [json.loads((out / f"{prefix}rank_{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in found] == [2, 2]
    return found


@pytest.mark.e2e
def test_study_telemetry_is_counted_once_and_rank_counters_survive_a_resume(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    output = launch(out)
    first = results(out)
    # rank 1's 160 samples (20 batches of 8) bound both ranks; rank 0's 83 ran out in
    # its 11th batch (3 samples), in the window of steps 9-12: it then re-serves its last
    # 8 batches in turn (b0 at step 12; b4-b7 in 13-16; b8, b9, b10 and b0 in 17-20)
    seen = [83 + 8 + 4 * 8 + (8 + 8 + 3 + 8), 160]
    assert [r["global_step"] for r in first] == [20, 20]
    assert [r["samples_seen"] for r in first] == seen
    assert [r["total_samples_seen"] for r in first] == [sum(seen)] * 2
    # the end-of-run line counts the samples trained on (rank 0's re-served ones too), as
    # the state does, and names the draws apart: it once said "243 draws of 243 samples
    # inserted", each sample trained on 1.0 times, beside a state of 310 samples trained on;
    # each rank's inserted samples follow (the script streams 83 and 160)
    assert (
        f"each sample trained on {sum(seen) / 243:.1f} times on average ({sum(seen)} "
        "samples trained on, of 243 inserted, all ranks: 83 on rank 0 and 160 on rank 1; "
        "243 drawn from the buffers: a rank "
        "whose data ran out first trains on its last batches again"
    ) in output, output[-3000:]
    for r in first:
        assert r["logs"], "no log"
        assert {log["source_messages"] for log in r["logs"]} == {201.0}  # 100 + 101
        assert {log["source_simulations_finished"] for log in r["logs"]} == {16.0}  # not 31
        for log in r["logs"]:  # counted over both ranks, each of capacity 16
            assert "buffer_size" not in log  # (an option's name, per rank; not a figure)
            assert log["buffer_fill"] == pytest.approx(log["buffer_samples"] / 32)
            assert 0 <= log["buffer_samples"] <= 32

    # from the checkpoint at the end (step 20): nothing left to train, counters per rank
    checkpoints = out / "checkpoints"
    launch(out, "--resume_from_checkpoint", str(checkpoints / "checkpoint-20"), "--tag", "end_")
    resumed = results(out, "end_")
    assert [r["global_step"] for r in resumed] == [20, 20]
    assert [r["samples_seen"] for r in resumed] == seen
    assert [r["total_samples_seen"] for r in resumed] == [sum(seen)] * 2

    # from step 10, inside the window of steps 9-12 (rank 0's stream ended; it padded
    # with b0), rank 0 with b10 and b0's copy pending, rank 1 with 2 batches: both resume
    # with the rest of that window (windows end at multiples of stop_sync_steps), rank 0
    # pads from the last batches the checkpoint kept, and both end at step 20, as
    # without the restart
    launch(out, "--resume_from_checkpoint", str(checkpoints / "checkpoint-10"), "--tag", "mid_")
    resumed = results(out, "mid_")
    assert [r["global_step"] for r in resumed] == [20, 20]
    assert [r["samples_seen"] for r in resumed] == seen
    assert [r["total_samples_seen"] for r in resumed] == [sum(seen)] * 2
    # the rest of the window (agreed at once), then one agreement started ahead per
    # window: 13-16, 17-20, and 21-24, which finds no data left on any rank
    assert [r["collectives"] for r in resumed] == [4, 4]


@pytest.mark.timeout(30)
def test_stream_source_marks_its_simulation_counts_as_study_figures() -> None:
    from melissa_trainer.stream.receiver_config import ReceiverConfig
    from melissa_trainer.stream.stream_source import StreamSource

    source = StreamSource(ReceiverConfig(expected_simulations=2))
    assert StreamSource.study_keys == {"simulations_finished", "simulations_abandoned"}
    assert StreamSource.study_keys <= set(source.telemetry())  # real keys, not typos
