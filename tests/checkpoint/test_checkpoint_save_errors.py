"""A save that fails: a full disk (a real one: a 1 MiB tmpfs, which needs root) is
named with the bytes needed and free; the staging directory goes, the previous
checkpoint stays intact; training stops with a non-zero exit on every rank (none
hangs in a barrier), or goes on with ``on_save_error="continue"``; the resume after
making room is exact.

The uninterrupted run of the same scenario (`resume_scenario.run`) is the oracle.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from held_ports import held_port
from process_tree import run_group
from resume_scenario import run

from melissa_trainer.checkpoint import paths as ckpt

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.e2e]

SCRIPT = Path(__file__).parents[1] / "resume_scenario.py"
BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}
#: what the failing save leaves free on the small disk: less than a checkpoint (~35 kB)
LEFT_FREE = 12 * 1024


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run(dict(BASE, output_dir=str(tmp_path_factory.mktemp("full"))))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: writes past it fail with ENOSPC, as on a full disk."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a small tmpfs, and mounting one needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"root, but cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """A file taking all of `disk`'s free space but `leave` bytes."""
    filler = disk / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(disk).free - leave))
    return filler


def hashes(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in directory.rglob("*")
        if p.is_file()
    }


def run_script(
    tmp_path: Path, config: dict[str, Any], ranks: int = 1
) -> subprocess.CompletedProcess[str]:
    """`resume_scenario.py` with `config` in a process (`accelerate launch` for ranks > 1)."""
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.json"
    config = dict(config, result=str(tmp_path / f"{path.stem}.result"))
    path.write_text(json.dumps(config))
    launch = [sys.executable]
    if ranks > 1:
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        launch = [accelerate or "accelerate", "launch", "--multi_gpu",
                  "--num_processes", str(ranks), "--num_machines", "1",
                  "--mixed_precision", "no", "--dynamo_backend", "no",
                  "--main_process_port", str(held_port())]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    return run_group([*launch, str(SCRIPT), str(path)], timeout=240, env=env)


def test_a_full_disk_is_named_stops_training_and_the_resume_after_making_room_is_exact(
    small_disk: Path, tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    out = small_disk / "out"
    root = out / "checkpoints"
    run(dict(BASE, output_dir=str(out), max_steps=10))
    before = hashes(root / "checkpoint-10")
    needed = sum((root / "checkpoint-10" / rel).stat().st_size for rel in before)
    filler = fill(small_disk, LEFT_FREE)

    failed = run_script(tmp_path, dict(BASE, output_dir=str(out), resume_from_checkpoint="latest"))
    assert failed.returncode != 0
    said = failed.stderr
    assert "CheckpointSaveError" in said, said[-3000:]
    # the error's own line (the logged traceback has the OSError's lines too)
    line = next(x for x in said.splitlines() if "No space left on device writing" in x)
    assert f"writing checkpoint-20 to {root}" in line
    assert f"the checkpoint needs about {needed} bytes" in line  # checkpoint-10's size
    free = int(re.search(r"; (\d+) bytes \(.*?\) were free when it failed", line).group(1))  # type: ignore[union-attr]
    assert 0 <= free <= LEFT_FREE
    assert f"{root / 'checkpoint-10'} is intact" in line
    assert not list(root.glob(".tmp-*")), "the staging directory was left behind"
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-10"]
    assert hashes(root / "checkpoint-10") == before

    filler.unlink()  # room made
    resumed = run(dict(BASE, output_dir=str(out), resume_from_checkpoint="latest"))
    assert resumed["losses"] == [(s, x) for s, x in uninterrupted["losses"] if s > 10]
    assert resumed["params"] == uninterrupted["params"]  # bitwise
    for key in ("global_step", "samples_seen", "total_samples_seen", "buffer"):
        assert resumed[key] == uninterrupted[key], key


def test_on_save_error_continue_trains_on_without_the_checkpoints_that_fail(
    small_disk: Path, tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    out = small_disk / "out"
    root = out / "checkpoints"
    run(dict(BASE, output_dir=str(out), max_steps=10))
    before = hashes(root / "checkpoint-10")
    fill(small_disk, LEFT_FREE)
    config = dict(BASE, output_dir=str(out), on_save_error="continue")
    # (no save at the end: a failed one fails the run, `test_a_failed_final_save_fails_the_run`)
    done = run_script(tmp_path, dict(config, resume_from_checkpoint="latest", save_at_end=False))
    assert done.returncode == 0, done.stderr[-3000:]
    # saves at 20, 30, 40 and 50 failed, each said so; training was not disturbed
    failures = re.findall(r"could not save checkpoint .*?checkpoint-(\d+): .*", done.stderr)
    assert failures == ["20", "30", "40", "50"], done.stderr[-3000:]
    # each failure's own line names the cause (its logged traceback follows it)
    assert len(re.findall(r"could not save .*No space left on device", done.stderr)) == 4
    result = json.loads((tmp_path / "config-0.result").read_text())
    assert result["params"] == uninterrupted["params"]
    assert result["global_step"] == uninterrupted["global_step"]
    assert not list(root.glob(".tmp-*"))
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-10"]
    assert hashes(root / "checkpoint-10") == before


def test_a_failed_final_save_fails_the_run(small_disk: Path, tmp_path: Path) -> None:
    """Under ``on_save_error="continue"`` the saves during training fail and training goes
    on; the end's save fails too: nothing is left to train on, so the run ends non-zero,
    saying which steps are not saved (user trial 33)."""
    out = small_disk / "out"
    root = out / "checkpoints"
    run(dict(BASE, output_dir=str(out), max_steps=10))
    fill(small_disk, LEFT_FREE)
    config = dict(BASE, output_dir=str(out), on_save_error="continue", max_steps=30)
    failed = run_script(tmp_path, dict(config, resume_from_checkpoint="latest"))
    assert failed.returncode != 0
    said = failed.stderr
    assert len(re.findall(r"could not save .*Training goes on without this checkpoint", said)) == 2
    line = next(x for x in said.splitlines() if "FinalCheckpointSaveError: could not save" in x)
    assert f"checkpoint {root / 'checkpoint-30'}: rank 0: No space left on device" in line
    assert "Training has ended at step 30" in line
    assert f"the newest checkpoint on disk is {root / 'checkpoint-10'} (step 10)" in line
    assert "steps 11..30 are not saved" in line
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-10"]
    assert not (tmp_path / "config-0.result").exists()


def test_a_save_failing_on_one_rank_stops_both_without_a_hang(tmp_path: Path) -> None:
    """Rank 1's writes are capped (RLIMIT_FSIZE, a real EFBIG from the kernel: no root
    needed) after step 15: its save at step 20 fails; rank 0's succeeds as far as it
    goes. Both ranks must raise, rank 0 remove the staging directory, checkpoint-10
    stay, and the launch end non-zero within the timeout (no rank left in a barrier)."""
    out = tmp_path / "out"
    root = out / "checkpoints"
    limit = {"after_step": 15, "bytes": 1000, "rank": 1}
    config = dict(BASE, output_dir=str(out), max_steps=30, file_size_limit=limit)
    failed = run_script(tmp_path, config, ranks=2)
    assert failed.returncode != 0
    said = failed.stdout + failed.stderr
    errors = [x for x in said.splitlines() if "CheckpointSaveError: could not save" in x]
    # (rank 1's own lines first: rank 0's traceback, when rank 1 died outside the
    # agreement, would fill the tail)
    rank1 = "\n".join(x for x in said.splitlines() if "rank1" in x or "rank 1" in x)
    assert len(errors) == 2, (rank1[-3000:], said[-3000:])  # raised on both ranks
    assert all(f"checkpoint {root / 'checkpoint-20'}: rank 1: " in x for x in errors)
    assert all("No space left" not in x for x in errors)  # not misnamed: the disk has room
    assert not list(root.glob(".tmp-*"))
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-10"]
    assert not (tmp_path / "config-0.result").exists()
