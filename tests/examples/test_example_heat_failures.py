"""The heat example when its solvers fail or its trainer stops, end to end in
subprocesses: a Ctrl-C of the trainer leaves no solver running; a study whose every
solver fails exits non-zero naming the failures; under --nonfinite fail a NaN is named
with its flag; a solver hung mid-stream is killed after --silence_floor and the study
completes (the set-up: heat_run.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from heat_run import EXAMPLE, MARKS, STEPS, TINY, summary_of, tampered_env
from process_tree import live, processes_with

pytestmark = MARKS


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT])
def test_stopping_the_trainer_leaves_no_simulation_running(tmp_path: Path, sig: int) -> None:
    """Ctrl-C of the trainer as soon as its first solvers run: a preemption (exit code
    128 + the signal, see `melissa_trainer.Preempted`); every solver it launched is gone
    soon after, none is left behind. (SIGTERM, and SIGINT again, mid-training with the
    same checks, a checkpoint and a resume: tests/checkpoint/test_preemption_heat.py,
    `test_heat_example_preempted_checkpoints_stops_the_solvers_and_resumes`; both
    signals take the same path, `PreemptionHandler`.)"""
    out = tmp_path / "out"
    slow = ["--num_simulations", "40", "--time_steps", "1000", "--grid_size", "10",
            "--num_validation", "1",
            "--job_limit", "2", "--disable_progress_bar", "--eval_steps", "none",
            "--output_dir", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), *slow],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    marker = str(out / "rendezvous")
    try:
        deadline = time.monotonic() + 150
        while len(processes_with(marker)) < 2:  # two solvers (their environment has it)
            assert proc.poll() is None and time.monotonic() < deadline, "no solver started"
            time.sleep(0.1)
        solvers = processes_with(marker)
        proc.send_signal(sig)
        assert proc.wait(30) == 128 + sig
        deadline = time.monotonic() + 60
        while [pid for pid in solvers if pid in processes_with(marker)]:
            assert time.monotonic() < deadline, "a solver outlived the trainer"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_study_whose_every_solver_fails_exits_non_zero_with_the_failures(
    tmp_path: Path,
) -> None:
    """Every solver fails at start-up (its environment lacks a module): the example
    exits non-zero, its error lists the failures and the last lines of their logs, and
    no model is saved as if the study had succeeded."""
    out = tmp_path / "out"
    env = tampered_env(SOLVER_BROKEN="1")
    # every attempt fails alike before any data: the study stops after 4 attempts
    # (LauncherTuning.systematic_failures) rather than spend its failure budget
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), *TINY, "--num_simulations", "4",
         "--output_dir", str(out), "--no_plot"],
        capture_output=True, text=True, timeout=110, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "the study stopped: every one of the study's first 4 attempts" in proc.stderr
    assert "No module named 'mysolver'" in proc.stderr  # a log's last lines
    assert "study of 4 simulations: 0 finished" in proc.stderr and "(= 4)" in proc.stderr
    assert not (out / "checkpoints").exists() or not list((out / "checkpoints").iterdir())
    assert processes_with(str(out / "rendezvous")) == []


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_nonfinite_fail_names_the_nan_and_its_flag(tmp_path: Path) -> None:
    """Issue 43, item 6: under --nonfinite fail, a solver that sends NaN in its last step
    and exits 0 before the launcher hears of it was failed as "data incomplete ... must
    send every step", and the summary named --nonfinite refuse. Each attempt fails for
    its NaN ("refused", the field and step named), and the summary names the flag in
    effect. The NaN comes from tests/scripts/tampered_solvers (SOLVER_NAN)."""
    env = tampered_env(SOLVER_NAN=f"1:{STEPS - 1}")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), *TINY, "--num_simulations", "4", "--nonfinite", "fail",
         "--output_dir", str(tmp_path / "out"), "--no_plot"],
        capture_output=True, text=True, timeout=200, cwd=tmp_path, env=env,
    )  # fmt: skip
    summary = summary_of(proc)
    log = proc.stdout + proc.stderr
    assert "data did not all arrive" not in log and "data incomplete" not in log, log[-4000:]
    assert "simulation 1 failed 3 times (exit codes ['refused', 'refused', 'refused']" in log
    assert f"simulation 1 time step {STEPS - 1}: field 'temperature' holds NaN or Inf" in log
    assert (summary["study"]["failed"], summary["study"]["finished"]) == (1, 4)
    assert summary["samples_refused_nonfinite"] == 3  # the NaN step of each attempt
    assert "(--nonfinite fail)" in proc.stdout and "--nonfinite refuse" not in log


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_a_solver_that_hangs_mid_stream_is_killed_after_the_silence_floor(
    tmp_path: Path,
) -> None:
    """A solver that sent its first message and then hangs (alive, silent) is killed
    once silent for `--silence_floor` seconds, the derived timeout's bound between two
    messages, not the start-up bound (`--startup_timeout`, 600 s by default: a user's
    report, a hang mid-stream found after 10 minutes per attempt); it is named, restarted,
    and the study completes with each (simulation, step) once.

    Oracle: the launcher's line on the kill, which names the rule that applied (the
    silence floor, "since its last message"), and the hung process's death; the start-up
    bound is set to an hour, far beyond this test's timeout, so that a kill by it cannot
    come within the test (no clock read: a busy 2-core machine). With one job at a time
    and the hang after the first message, no silence between two messages can have been
    seen when it hangs (the case where the start-up bound applied)."""
    out, hang = tmp_path / "out", tmp_path / "hang.json"
    floor = 3.0
    env = tampered_env(SOLVER_HANG=f"0:1:{hang}")
    n = 3
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--num_simulations", str(n), "--job_limit", "1",
           "--silence_floor", str(floor), "--startup_timeout", "3600", "--no_plot",
           "--output_dir", str(out)]  # fmt: skip
    with open(tmp_path / "stdout", "w+") as stdout, open(tmp_path / "stderr", "w+") as stderr:
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=stdout, stderr=stderr, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 150
            while not hang.exists():
                assert proc.poll() is None and time.monotonic() < deadline, "no hang"
                time.sleep(0.05)
            began = json.loads(hang.read_text())
            # (killed by the silence floor: a kill by the start-up bound, an hour, would
            # come after the timeout marker ended this test)
            while live(began["pid"]):
                time.sleep(0.05)
            assert proc.wait(150) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            with contextlib.suppress(NameError, ProcessLookupError):
                os.kill(began["pid"], signal.SIGKILL)
        stdout.seek(0)
        stderr.seek(0)
        result = subprocess.CompletedProcess(cmd, 0, stdout.read(), stderr.read())
    summary = summary_of(result)
    study = summary["study"]
    assert study["finished"] == n and study["restarts"] == 1 and study["redraws"] == 0, study
    assert summary["samples_received"] == n * STEPS  # each (simulation, step) once
    (line,) = [x for x in result.stderr.splitlines() if "silent for" in x]
    assert "simulation 0 (attempt 0, parameters {" in line, line
    assert f"since its last message; simulation_timeout='auto': max(silence_floor={floor}" in line
    assert processes_with(str(out / "rendezvous")) == []
