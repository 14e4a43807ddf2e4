"""The heat example with a `SampleLedger`, SIGKILLed after a checkpoint and resumed
from `latest`: `python -m melissa_trainer.lineage check` passes its ledger (the first
run's steps after the checkpoint discarded), and fails the ledger doctored with a
duplicate, with a missing batch, and with the resume rule defeated."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import processes_with, sigkill_between_launches
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.lineage import check, read_runs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

DRIVER = Path(__file__).with_name("lineage_heat_driver.py")
SIMULATIONS, STEPS, BATCH, SAVE_STEPS = 6, 20, 4, 6
FLAGS = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "6",
    "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "16", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", str(BATCH),
    "--save_steps", str(SAVE_STEPS), "--logging_steps", "5", "--eval_steps", "none",
    "--disable_progress_bar", "--stop_sync_steps", "2",
]  # fmt: skip


def start(tmp: Path, name: str, *extra: str, paced: bool) -> tuple[subprocess.Popen[bytes], Path]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    if paced:
        env.update(STEP_SLEEP="0.12", SOLVER_STEP_SLEEP="0.04")
    log = tmp / f"{name}.out"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), *FLAGS, "--output_dir", str(tmp / "out"), *extra],
            cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return proc, log


def last_step(out: Path) -> int:
    file = out / "lineage" / "rank-0.log"
    steps = re.findall(r"^B (\d+) ", file.read_text(), re.M) if file.exists() else []
    return int(steps[-1]) if steps else 0


def between_checkpoints(out: Path) -> bool:
    """A checkpoint, and the ledger 2-4 steps past a multiple of `SAVE_STEPS`: the kill
    then leaves steps after the checkpoint for the resume to redo."""
    return latest_checkpoint(out / "checkpoints") is not None and 2 <= last_step(out) % 6 <= 4


@pytest.mark.timeout(600)
def test_a_sigkilled_and_resumed_study_passes_and_a_doctored_ledger_fails(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first, log = start(tmp_path, "first", paced=True)
    try:
        wait_until(lambda: between_checkpoints(out), lambda: log.read_text()[-3000:], 240,
                   procs=[first], interval=0.02)  # fmt: skip
        sigkill_between_launches(first.pid, [])  # (one rank: the group's leader)
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(30)
    wait_until(lambda: not processes_with(str(out / "rendezvous")), "solvers gone", 30)
    resumed_from = latest_checkpoint(out / "checkpoints")
    assert resumed_from is not None
    saved = int(resumed_from.name.split("-")[1])
    killed_at = max(step for step, *_ in read_runs(out)[0].records)
    assert killed_at > saved  # steps the resume redoes: the rule is exercised
    second, log = start(tmp_path, "second", "--resume_from_checkpoint", "latest", paced=False)
    assert second.wait(300) == 0, log.read_text()[-3000:]

    runs = read_runs(out)
    assert [r.start_step for r in runs] == [0, saved] and runs[1].end_step is not None
    cli = [sys.executable, "-m", "melissa_trainer.lineage", "check", str(out),
           "--simulations", str(SIMULATIONS), "--steps", str(STEPS)]  # fmt: skip
    passed = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "EXACTLY ONCE: OK" in passed.stdout and f"kept up to step {saved}" in passed.stdout

    ledger = out / "lineage" / "rank-0.log"
    lines = ledger.read_text().splitlines(keepends=True)
    kept = [i for i, line in enumerate(lines) if line.startswith(f"B {saved + 1} ")]
    resumed = kept[-1]  # the resumed run's record of the step after the checkpoint

    def doctored(name: str, new: list[str]) -> Path:
        folder = tmp_path / name / "lineage"
        shutil.copytree(out / "lineage", folder)
        (folder / "rank-0.log").write_text("".join(new))
        return folder

    twice = doctored("twice", [*lines, lines[resumed]])  # a step's samples trained again
    report = check(twice, SIMULATIONS, STEPS)
    assert not report.ok and len(report.duplicates) == BATCH, report
    gone = doctored("gone", lines[:resumed] + lines[resumed + 1 :])  # a step lost
    report = check(gone, SIMULATIONS, STEPS)
    assert not report.ok and len(report.missing) == BATCH, report
    header = next(i for i, line in enumerate(lines) if line.startswith("R ") and i > 0)
    late = lines[header].replace(f'"start_step": {saved}', f'"start_step": {killed_at}')
    no_rule = doctored("no_rule", [*lines[:header], late, *lines[header + 1 :]])
    report = check(no_rule, SIMULATIONS, STEPS)  # the redone steps counted twice
    assert not report.ok and len(report.duplicates) == BATCH * (killed_at - saved), report
    cut = subprocess.run([*cli[:4], str(twice), *cli[5:]], capture_output=True, text=True)
    assert cut.returncode == 1 and "DUPLICATES: 4 samples" in cut.stdout, cut.stdout
