"""Ctrl-C (SIGINT) before the first step: while the source starts (a study launching
its simulations) or right after a resume loaded its checkpoint. The trainer's signal
handling began only after both, so the signal there was Python's KeyboardInterrupt: a
traceback through whatever was running, exit code 1 (not 130), no word of how to
resume. Now it is a preemption like any other: one line naming the signal, the step
and how to resume, exit code 130, and the resume trains on each sample once (the
oracle: the samples each run trained on, logged per step by the script)."""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import linear_samples

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SCRIPT = Path(__file__).parents[1] / "scripts" / "interrupted_start.py"
N, BATCH = 400, 8


def run(point: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), point, str(out), *extra],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""},
    )


def trained(out: Path) -> collections.Counter[str]:
    """How often each sample (its x[0], as the script logs it) was trained on."""
    lines = (out / "steps.log").read_text().splitlines() if (out / "steps.log").exists() else []
    return collections.Counter(v for line in lines for v in line.split())


def preempted_at(done: subprocess.CompletedProcess[str]) -> int:
    """The step of the run's one "preempted by SIGINT" line, after checking that it
    exited as a preemption does: code 130, no traceback. (The step is the first stop
    synchronisation's or the next: the handler's thread notices the signal
    asynchronously.)"""
    text = done.stdout + done.stderr
    assert done.returncode == 130, text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    (step,) = re.findall(r"preempted by SIGINT at step (\d+); checkpoint ", text)
    assert "--resume_from_checkpoint latest" in text
    return int(step)


def test_ctrl_c_while_the_source_starts_is_a_preemption(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run("start", out)
    step = preempted_at(first)
    assert step <= 2  # the first window (2 steps) or before it
    assert (out / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json").is_file()
    assert trained(out).total() == step * BATCH
    second = run("none", out, "resume")
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    expected = collections.Counter(f"{s['x'][0]:.6f}" for s in linear_samples(N))
    assert trained(out) == expected  # every sample once, across the two runs


def test_ctrl_c_while_a_resume_loads_is_a_preemption(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # a run cut back to its checkpoint of step 20: the later ones removed, its log kept
    # to that step (as if it had been killed just after it)
    full = run("none", out)
    assert full.returncode == 0, (full.stdout + full.stderr)[-3000:]
    for name in ("checkpoint-30", "checkpoint-40", "checkpoint-50"):
        shutil.rmtree(out / "checkpoints" / name)
    log = out / "steps.log"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:20]))
    interrupted = run("load", out, "resume")
    step = preempted_at(interrupted)
    assert 20 <= step <= 22  # the first window after the load (2 steps) or before it
    assert trained(out).total() == step * BATCH
    resumed = run("none", out, "resume")
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    expected = collections.Counter(f"{s['x'][0]:.6f}" for s in linear_samples(N))
    assert trained(out) == expected
