"""Two real processes under `accelerate launch --multi_gpu --num_processes 2` (gloo on CPU).

Ranks receive uneven streams; every rank must end at the same step, without a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from held_ports import held_port
from process_tree import run_group
from waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.e2e]

SCRIPT = Path(__file__).parents[1] / "scripts" / "uneven_streams.py"


def launch(tmp_path: Path, *flags: str, ok: bool = True) -> list[dict]:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        accelerate,
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(held_port()),
        str(SCRIPT),
        "--output_dir",
        str(out),
        "--batch_size",
        "8",
        "--buffer",  # each sample once: the step counts rely on it
        "fifo",
        "--buffer_size",
        "64",
        "--report_to",
        "none",
        "--disable_progress_bar",
        "--logging_steps",
        "3",
        *flags,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine (1 GPU cannot hold 2 ranks)
    proc = run_group(cmd, timeout=200, env=env)
    assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in results] == [2, 2], "expected two ranks in one process group"
    assert {r["backend"] for r in results} == {"gloo"}
    return results


def test_uneven_streams_end_every_rank_at_the_same_step(tmp_path: Path) -> None:
    results = launch(
        tmp_path, "--short", "10", "--long", "60", "--stop_sync_steps", "4", "--save_steps", "4"
    )
    steps = {r["global_step"] for r in results}
    # rank 1's 60 batches bound both ranks: none of its data is left untrained; rank 0,
    # whose 10 ran out first, trained on its last 8 batches again for the other 50
    assert steps == {60}
    assert all(r["stream_ended"] for r in results)
    assert results[0]["samples_seen"] == results[1]["samples_seen"] == 60 * 8
    assert results[1]["distinct_seen"] == 60 * 8  # each of rank 1's samples once
    assert results[0]["distinct_seen"] == 10 * 8  # rank 0: its own, some several times
    assert len(results[0]["seen_again"]) == 8 * 8  # its last 8 batches, in turn
    # one stop all-reduce per window of 4 steps: the first window's two (its first
    # step alone: training starts at the first batch), 14 windows and the one that
    # finds no data left on any rank, never one per step
    assert results[0]["collectives"] == results[1]["collectives"] == 17
    # DDP kept the replicas identical; reduced figures are identical on both ranks
    assert results[0]["param_sum"] == results[1]["param_sum"]
    assert results[0]["eval_loss"] == results[1]["eval_loss"] and results[0]["eval_loss"]
    # the per-simulation tails: reduced over both ranks (each held part of every
    # simulation), identical on both, and those of the model's own per-simulation MSEs
    assert results[0]["eval_tails"] == results[1]["eval_tails"]
    p99, largest, simulations = results[0]["eval_tails"][-1]
    oracle = results[0]["simulation_mse"]
    assert simulations == len(oracle) == 3
    assert largest == pytest.approx(max(oracle), rel=1e-5)
    assert p99 == pytest.approx(float(np.percentile(oracle, 99)), rel=1e-5)
    assert sorted(oracle)[1] < p99 < largest
    # which one is worst, and every one's loss: the same on both ranks, the oracle's
    assert results[0]["eval_worst"] == results[1]["eval_worst"]
    assert results[0]["eval_worst"][-1] == int(np.argmax(oracle))  # (ids 0, 1, 2)
    assert results[0]["held_out_losses"] == results[1]["held_out_losses"]
    ids, losses = results[0]["held_out_losses"]
    assert ids == [0, 1, 2] and losses == pytest.approx(oracle, rel=1e-5)
    assert results[0]["losses"] == results[1]["losses"]
    ckpt = tmp_path / "out" / "checkpoints" / "checkpoint-60"
    assert (ckpt / "rank_0" / "buffer.json").is_file() and (
        ckpt / "rank_1" / "buffer.json"
    ).is_file()


def test_compiled_ddp_trains_as_eager_ddp(tmp_path: Path) -> None:
    """`torch_compile` under DDP: the step compiles the DDP-wrapped model (dynamo's DDP
    support splits the graph at the gradient buckets); with aot_eager (ATen's kernels)
    the run is the eager one bit for bit, on both ranks: losses, weights, validation."""
    flags = ["--short", "12", "--long", "12", "--stop_sync_steps", "4", "--save_steps", "6"]
    eager = launch(tmp_path / "eager", *flags)
    compiled = launch(tmp_path / "compiled", *flags, "--torch_compile_backend", "aot_eager")
    assert [r["compiled_step"] for r in eager] == ["DistributedDataParallel"] * 2
    assert [r["compiled_step"] for r in compiled] == ["OptimizedModule"] * 2
    assert [r["global_step"] for r in compiled] == [12, 12]
    for got, want in zip(compiled, eager, strict=True):
        assert got["losses"] == want["losses"] and len(got["losses"]) == 4
        assert got["param_sum"] == want["param_sum"]
        assert got["eval_loss"] == want["eval_loss"]
    # the checkpoint names the weights as an eager run does (DDP's prefix stripped or
    # not, the same as eager's): no "_orig_mod."
    from safetensors import safe_open

    names = []
    for run in ("eager", "compiled"):
        path = tmp_path / run / "out" / "checkpoints" / "checkpoint-12" / "model.safetensors"
        with safe_open(str(path), "pt") as f:
            names.append(sorted(f.keys()))
    assert names[0] == names[1] and not any("_orig_mod" in n for n in names[1])


def test_a_stop_requested_on_one_rank_stops_both(tmp_path: Path) -> None:
    """Rank 1 asks at step 5, in the window of steps 5-8: the agreement on the next
    window (9-12) was started before step 5 ran, so the stop rides in the one after,
    started at step 8 and read at the end of step 12, where both ranks stop (a stop
    takes effect one window later under several ranks: `StopSync.start`)."""
    results = launch(
        tmp_path, "--short", "100", "--long", "100", "--stop_sync_steps", "4", "--stop_at", "5"
    )
    assert {r["global_step"] for r in results} == {12}
    assert not any(r["stream_ended"] for r in results)


def test_a_nan_loss_on_one_rank_stops_both_at_the_same_step_naming_it(tmp_path: Path) -> None:
    """Rank 1's sample 106 holds NaN: batch 13 of 8, step 14 of rank 1 (rank 0's losses
    stay finite). Both ranks stop with the error naming step 14, at step 15 (the log
    of step 15, every 3 steps, checks first, collectively: before the stop flag's
    window ends at 16), the launch exits non-zero, and the
    checkpoints on disk are those of steps 4, 8 and 12, with finite weights."""
    from safetensors.numpy import load_file

    flags = ["--short", "100", "--long", "100", "--stop_sync_steps", "4", "--save_steps", "4"]
    results = launch(tmp_path, *flags, "--nan_at", "106", ok=False)
    assert [r["error_step"] for r in results] == [14, 14]
    assert [r["global_step"] for r in results] == [15, 15]
    saved = sorted((tmp_path / "out" / "checkpoints").glob("checkpoint-*"))
    assert [p.name for p in saved] == ["checkpoint-12", "checkpoint-4", "checkpoint-8"]
    for path in saved:
        for value in load_file(str(path / "model.safetensors")).values():
            assert np.isfinite(value).all(), path


@pytest.mark.timeout(90)
def test_a_launch_that_times_out_is_killed_with_its_children(tmp_path: Path) -> None:
    """`run_group` (the 2-rank launches above): on timeout the launcher's children die
    too, as `accelerate launch`'s ranks must (killing the launcher alone left them)."""
    pid_file = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; wait"
    timeout = 2.0
    while True:
        with pytest.raises(subprocess.TimeoutExpired):
            run_group(["sh", "-c", script], timeout=timeout)
        if pid_file.exists():
            break
        # the timeout came before the shell had started its child and written its pid (a
        # loaded machine: two process starts in 2 s): again, with twice the time
        assert timeout < 32, f"the shell wrote no pid within {timeout:g} s"
        timeout *= 2
    child = int(pid_file.read_text())
    wait_until(
        lambda: not Path(f"/proc/{child}").exists() or b"Z" in _state(child),
        f"the end of the launcher's child {child}",
        60,
        interval=0.05,
    )


def _state(pid: int) -> bytes:
    """The process's state letter from /proc (Z: a zombie, dead but not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"Z"
