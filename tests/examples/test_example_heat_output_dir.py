"""The heat example refused at its output directory, one line and exit status 2, as a
user running it sees it: an earlier run's checkpoints, another trainer holding it (its
lock's record unreadable, or a foreign holder), a resume that changes the study or from a
checkpoint that does not verify; and a resume past its newest checkpoint made unreadable
(the set-up: heat_run.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from heat_run import EXAMPLE, MARKS, SIMULATIONS, TINY, summary_of
from helpers import permission_bits_bite

pytestmark = MARKS


def lock_holder(held: Path, go: Path) -> subprocess.Popen[str]:
    """tests/scripts/hold_output_lock.py holding `held`'s lock as a running trainer does,
    until `go` exists; it prints ``held`` on stdout once it holds it."""
    script = Path(__file__).parents[1] / "scripts" / "hold_output_lock.py"
    return subprocess.Popen(
        [sys.executable, str(script), str(held), "running", str(go)],
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.e2e
@pytest.mark.timeout(200)
def test_a_refusal_to_start_is_one_error_line_and_exit_status_2(tmp_path: Path) -> None:
    """The two refusals at start, as a user running the example sees them: an earlier
    run's checkpoints in --output_dir (its rendezvous left as it was), and another
    trainer holding it."""

    def run(out: Path) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=90)

    used = tmp_path / "used"
    (used / "checkpoints" / "checkpoint-5").mkdir(parents=True)  # an earlier run's
    # its rendezvous, its stop record: what a Predictor there reads (htrial8: the refused
    # start had removed it)
    (used / "rendezvous").mkdir()
    record = '{"run_id": "earlier", "stopped": true}'
    (used / "rendezvous" / "rank_0.json").write_text(record)
    proc = run(used)
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("train.py: error: invalid start: output_dir=") and (
        "--resume_from_checkpoint latest" in last and "--overwrite_output_dir" in last
    ), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    rank_file = used / "rendezvous" / "rank_0.json"
    assert rank_file.is_file() and rank_file.read_text() == record, "the refusal changed it"

    held, go = tmp_path / "held", tmp_path / "go"
    holder = lock_holder(held, go)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = run(held)
    finally:
        go.touch()
        holder.wait(30)
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("train.py: error: output_dir") and "in use by another trainer" in last
    assert "Traceback" not in proc.stderr


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_a_held_lock_with_an_unreadable_record_refuses_the_example(tmp_path: Path) -> None:
    """Issue 43, item 1: the lock file of a running trainer truncated (`> trainer.lock`),
    or another program holding its flock with a record that is not JSON, once let a second
    run of the example in (it resumed and rewrote the rendezvous under the first one). The
    flock is the truth: the second run is refused, one line, exit status 2, the holder's
    pid named from /proc/locks, and nothing written in the directory but the lock file."""
    held, go = tmp_path / "held", tmp_path / "go"
    holder = lock_holder(held, go)
    foreign = "\n".join([
        "import fcntl, os, sys, time",
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)",
        "fcntl.flock(fd, fcntl.LOCK_EX)",
        "os.ftruncate(fd, 0); os.write(fd, b'backup in progress')",
        "print('held', flush=True); time.sleep(200)",
    ])  # fmt: skip
    other = tmp_path / "other"
    other.mkdir()
    intruder = subprocess.Popen(
        [sys.executable, "-c", foreign, str(other / "trainer.lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert intruder.stdout is not None and intruder.stdout.readline().strip() == "held"
        os.truncate(held / "trainer.lock", 0)
        for out, pid in ((held, holder.pid), (other, intruder.pid)):
            cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
            assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
            last = proc.stderr.strip().splitlines()[-1]
            assert last.startswith("train.py: error: output_dir") and "in use" in last, last
            assert f"held by pid {pid} on this host" in last, last
            assert "Traceback" not in proc.stderr
            assert sorted(p.name for p in out.iterdir()) == ["trainer.lock"]
    finally:
        go.touch()
        intruder.kill()
        for proc_ in (holder, intruder):
            proc_.wait(30)
            assert proc_.stdout is not None
            proc_.stdout.close()


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_an_unreadable_latest_checkpoint_is_skipped_and_named_like_a_corrupt_one(
    tmp_path: Path,
) -> None:
    """Issue 43, item 4: the newest checkpoint's folder made unreadable (`chmod 000`)
    once crashed the resume with a PermissionError traceback. It is skipped with one
    warning naming it and why, and the run resumes from the one before it and ends.
    The resumed run meets the permission bits as a user would (`permission_bits_bite`:
    root's capabilities to bypass them dropped)."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out), "--save_steps", "150"]
    summary_of(subprocess.run(cmd, capture_output=True, text=True, timeout=120))
    found = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name[11:]))
    assert len(found) >= 2, found
    latest, before = found[-1], found[-2]
    latest.chmod(0)
    try:
        proc = subprocess.run(
            [*cmd, "--resume_from_checkpoint", "latest"],
            capture_output=True, text=True, timeout=150, preexec_fn=permission_bits_bite,
        )  # fmt: skip
    finally:
        latest.chmod(0o755)  # (so that pytest can remove it)
    summary = summary_of(proc)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert (
        f"checkpoint {latest} does not verify: {latest / 'manifest.json'}: unreadable manifest "
        "(Permission denied): skipped"
    ) in log, log[-3000:]
    assert summary["resumed_from"] == str(before)
    assert summary["study"]["finished"] == SIMULATIONS


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_refusal_to_resume_is_one_error_line_and_exit_status_2(tmp_path: Path) -> None:
    """Issue 43, item 8: a resume that changes the study (`StudyChanged`) and one from a
    checkpoint that does not verify (`CheckpointError`) once ended in a traceback with
    exit status 1; like the refusals to start, they are one line naming the fix, exit
    status 2, and nothing is trained."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out), "--save_steps", "150"]
    summary_of(subprocess.run(cmd, capture_output=True, text=True, timeout=120))
    found = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name[11:]))
    os.truncate(found[0] / "model.safetensors", 10)
    cases = [
        (["--resume_from_checkpoint", "latest", "--sampler", "uniform"],
         "the study's sampler changed from 'lhs' to 'uniform'", "--sampler lhs"),
        (["--resume_from_checkpoint", str(found[0])],
         f"checkpoint {found[0]} does not verify", str(found[-1])),
    ]  # fmt: skip
    for flags, what, fix in cases:
        proc = subprocess.run([*cmd, *flags], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"train.py: error: {what}") and fix in last, last
        assert sorted(p for p in (out / "checkpoints").iterdir() if p.is_dir()) == sorted(found)
