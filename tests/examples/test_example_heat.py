"""The heat-PDE example (the README's first command), end to end in subprocesses, tiny:
launched solver processes stream to the trainer under `python` and under
`accelerate launch` with two processes (gloo on CPU), the latter with `--sampler breed`
(both ranks' losses steer the adaptive sampler)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import live, permission_bits_bite, processes_with, run_group
from usage_error import heat_usage_error

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

EXAMPLE = Path(__file__).parents[2] / "examples" / "heat_pde" / "train.py"
SIMULATIONS, STEPS, VALIDATION = 16, 20, 4
TINY = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "10",
    "--job_limit", "2", "--num_validation", str(VALIDATION), "--hidden", "64",
    "--learning_rate", "3e-3", "--buffer_size", "400", "--watermark", "60", "--batch_size", "16",
    "--sample_to_insert_ratio", "20", "--eval_steps", "none", "--logging_steps", "100",
    "--disable_progress_bar", "--json",
]  # fmt: skip
KEYS = {"val_mse", "val_mse_p99", "val_mse_max", "val_simulations", "val_mse_per_simulation",
        "mean_field_mse", "wall_seconds",
        "simulation_seconds", "training_seconds",
        "sequential_seconds", "samples_seen", "samples_received", "steps",
        "simulations_finished", "study", "plot", "samples_refused_nonfinite"}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _not_json(constant: str) -> None:
    raise ValueError(f"the --json line holds {constant}, which is not JSON")


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
    summary = json.loads(last, parse_constant=_not_json)  # strict: no NaN or Infinity
    assert set(summary) >= KEYS
    return summary


def check_run(summary: dict, out: Path) -> None:
    assert summary["val_mse"] < 0.5 * summary["mean_field_mse"]
    # the tails of the 4 held-out simulations (equal sizes: val_mse is their mean), said
    # with their count; the example's own per-simulation errors (its model run on the
    # set) against the trainer's validation, computed apart
    assert summary["val_mse"] <= summary["val_mse_p99"] <= summary["val_mse_max"]
    errors = np.array(summary["val_mse_per_simulation"])
    assert summary["val_simulations"] == len(errors) == VALIDATION
    assert errors.max() == pytest.approx(summary["val_mse_max"], rel=1e-4)
    assert np.percentile(errors, 99) == pytest.approx(summary["val_mse_p99"], rel=1e-4)
    assert errors.mean() == pytest.approx(summary["val_mse"], rel=1e-4)
    study = summary["study"]
    assert study["failed"] == study["restarts"] == study["redraws"] == study["abandoned"] == 0
    # the stream ended: the source let the simulations exit before stopping the launcher
    assert study["finished"] == SIMULATIONS and study["running"] == 0, study
    assert summary["samples_received"] == SIMULATIONS * STEPS  # each (simulation, step) once
    assert summary["samples_refused_nonfinite"] == 0
    assert summary["simulation_seconds"] > 0 and summary["training_seconds"] > 0
    assert summary["samples_seen"] >= summary["samples_received"]  # each drawn at least once
    assert Path(summary["plot"]) == out / "heat_pde_validation.png"
    assert (out / "heat_pde_validation.png").stat().st_size > 10_000
    assert list((out / "runs").glob("events.out.tfevents.*"))
    assert processes_with(str(out / "rendezvous")) == []  # no simulation outlived the trainer


# hang guards, not time limits: ~30 s alone, >100 s beside another xdist worker on a busy
# 2-core machine (test_stopping_the_trainer_... waits as long for its solvers, likewise)
@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_heat_example_streams_from_launched_solvers_and_beats_the_mean_field(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=220, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)
    assert summary["sampler"] is None  # a fixed design (LHS): nothing observed
    assert "overlap:" in proc.stdout and "validation MSE" in proc.stdout
    assert f"per held-out simulation (of {VALIDATION}," in proc.stdout
    assert "judging --sampler" not in proc.stdout  # (said to adaptive runs only)
    assert len(list((out / "study" / "logs").glob("*.log"))) >= SIMULATIONS  # one per job


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_heat_example_samples_with_the_density_sampler(tmp_path: Path) -> None:
    """``--sampler density`` (the guide's adaptive sampler for 6 parameters and more):
    the whole budget drawn by it, the trainer's per-simulation losses fed to it, and the
    line that says how its draws were made in its own terms."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--sampler", "density", "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=220, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)
    drawn = summary["sampler"]
    assert drawn["draws"] == SIMULATIONS and drawn["observed"] > 0
    # the losses it held when it made its last draw (the end's are observed after it)
    assert 0 <= drawn["observed_at_last_draw"] <= drawn["observed"]
    assert "with the high-loss warp" in drawn["drawn_by"]
    # said once, by the study's account (INFO: printed; WARNING: logged), every fact in it
    said = proc.stdout + proc.stderr
    assert said.count("adaptive sampler: of") == 1 and "density: of" not in said, said
    (line,) = [x for x in said.splitlines() if f"adaptive sampler: of {SIMULATIONS} draws" in x]
    assert "of them by its last draw" in line and "(the last 100 kept)" in line, line
    # how to judge it: the A/B against the plain design on the same seeds
    assert "judging --sampler density" in proc.stdout
    assert f"--sampler lhs --num_simulations {SIMULATIONS} --seed 42 --seeds 3" in proc.stdout


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_heat_example_runs_under_accelerate_launch_with_two_processes(tmp_path: Path) -> None:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()),
           str(EXAMPLE), *TINY, "--sampler", "breed", "--output_dir", str(out)]  # fmt: skip
    # gloo on CPU on any machine (1 GPU cannot hold 2 ranks)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = run_group(cmd, timeout=160, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)  # samples_received: summed over the two ranks' receivers
    # the adaptive sampler drew the whole budget and was fed the reduced losses
    breed = summary["sampler"]
    assert breed["draws"] == SIMULATIONS and 0 < breed["explored"] <= SIMULATIONS
    assert breed["observed"] > 0
    # said once, by the study's account (the example's own second line is gone)
    said = proc.stdout + proc.stderr
    assert said.count(f"adaptive sampler: of {SIMULATIONS} draws") == 1, said[-3000:]


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT])
def test_stopping_the_trainer_leaves_no_simulation_running(tmp_path: Path, sig: int) -> None:
    """Ctrl-C of the trainer as soon as its first solvers run: a preemption (exit code
    128 + the signal, see `melissa_trainer.Preempted`); every solver it launched is gone
    soon after, none is left behind. (SIGTERM, and SIGINT again, mid-training with the
    same checks, a checkpoint and a resume: tests/checkpoint/test_preemption.py,
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
    tampered = Path(__file__).parents[1] / "scripts" / "tampered_solvers"  # a sitecustomize.py
    path = os.pathsep.join(filter(None, [str(tampered), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SOLVER_BROKEN": "1", "PYTHONPATH": path}
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
@pytest.mark.timeout(120)
def test_heat_example_runs_with_a_fifo_buffer_out_of_the_box(tmp_path: Path) -> None:
    """`--buffer fifo` alone: the example's rate limit (`sample_to_insert_ratio` 8, a
    reservoir's option) is not its default then (it was, and the run was refused)."""
    out = tmp_path / "out"
    flags = ["--num_simulations", "4", "--time_steps", "10", "--grid_size", "6",
             "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
             "--buffer", "fifo", "--buffer_size", "32", "--watermark", "8", "--batch_size", "4",
             "--eval_steps", "none", "--disable_progress_bar", "--json"]  # fmt: skip
    cmd = [sys.executable, str(EXAMPLE), *flags, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_group(cmd, timeout=100, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    assert summary["samples_received"] == 4 * 10  # each (simulation, step) once
    assert summary["samples_seen"] == 4 * 10  # a FIFO serves each sample once
    assert summary["study"]["finished"] == 4 and summary["study"]["failed"] == 0


@pytest.mark.e2e
def test_heat_example_trains_under_bf16_with_its_buffer_on_the_accelerator(
    tmp_path: Path,
) -> None:
    """Two flags the example parses, in one run (they were two runs of the same study):
    `--mixed_precision bf16` trains under Accelerate's bf16 autocast, on CPU too, to a
    finite error; `--buffer_device accelerator` (a flag its --help lists) trains with
    batches gathered where the buffer is, through its `process_batch` (a user's report:
    it raised, the example passing a per-sample function); on CPU, the CPU."""
    out = tmp_path / "out"
    flags = ["--num_simulations", "4", "--time_steps", "10", "--grid_size", "6",
             "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
             "--buffer_size", "64", "--watermark", "8", "--batch_size", "8",
             "--mixed_precision", "bf16", "--buffer_device", "accelerator",
             "--eval_steps", "none", "--disable_progress_bar", "--json"]  # fmt: skip
    cmd = [sys.executable, str(EXAMPLE), *flags, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_group(cmd, timeout=100, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    assert summary["samples_received"] == 4 * 10
    assert summary["steps"] > 0 and 0 < summary["val_mse"] < float("inf")
    (saved,) = (out / "checkpoints").glob("checkpoint-*/training_args.json")  # at the end
    saved_args = json.loads(saved.read_text())
    assert saved_args["mixed_precision"] == "bf16"
    assert saved_args["buffer_device"] == "accelerator"


def test_a_reservoir_option_given_with_a_fifo_names_the_flag_that_unsets_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Given explicitly, the rate limit is still refused with a FIFO: the error says
    how to unset it on the command line."""
    from heat_pde.train import parser  # the example's (examples/ is on sys.path)

    err = heat_usage_error(["--buffer", "fifo", "--sample_to_insert_ratio", "8"], capsys)
    assert "sample_to_insert_ratio=8.0 only applies to buffer='reservoir'" in err
    assert "--sample_to_insert_ratio None" in err
    args, _ = parser(["--buffer", "fifo"]).parse_args_into_dataclasses(["--buffer", "fifo"])
    assert args.buffer == "fifo" and args.sample_to_insert_ratio is None
    args, _ = parser([]).parse_args_into_dataclasses([])
    assert args.buffer == "reservoir" and args.sample_to_insert_ratio == 8.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--grid_size", "0", "grid_size=0 must be >= 2"),
        ("--time_steps", "0", "time_steps=0 must be >= 1"),
        ("--dt", "0", "dt=0.0 must be > 0"),
    ],
)
def test_a_bad_solver_option_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    """The solver's own options are refused by the parser (exit 2, the field named),
    not by a traceback from `main` once the trainer's setup has begun."""
    assert message in heat_usage_error([flag, value], capsys)


@pytest.mark.e2e
@pytest.mark.timeout(200)
def test_a_refusal_to_start_is_one_error_line_and_exit_status_2(tmp_path: Path) -> None:
    """The two refusals at start, as a user running the example sees them: an earlier
    run's checkpoints in --output_dir, and another trainer holding it."""

    def run(out: Path) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=90)

    used = tmp_path / "used"
    (used / "checkpoints" / "checkpoint-5").mkdir(parents=True)  # an earlier run's
    proc = run(used)
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("train.py: error: invalid start: output_dir=") and (
        "--resume_from_checkpoint latest" in last and "--overwrite_output_dir" in last
    ), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr

    held, go = tmp_path / "held", tmp_path / "go"
    script = Path(__file__).parents[1] / "scripts" / "hold_output_lock.py"
    holder = subprocess.Popen(
        [sys.executable, str(script), str(held), "running", str(go)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
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
    script = Path(__file__).parents[1] / "scripts" / "hold_output_lock.py"
    holder = subprocess.Popen(
        [sys.executable, str(script), str(held), "running", str(go)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
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
        assert sorted((out / "checkpoints").iterdir()) == sorted(found)  # nothing trained


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_nonfinite_fail_names_the_nan_and_its_flag(tmp_path: Path) -> None:
    """Issue 43, item 6: under --nonfinite fail, a solver that sends NaN in its last step
    and exits 0 before the launcher hears of it was failed as "data incomplete ... must
    send every step", and the summary named --nonfinite refuse. Each attempt fails for
    its NaN ("refused", the field and step named), and the summary names the flag in
    effect. The NaN comes from tests/scripts/tampered_solvers (SOLVER_NAN)."""
    tampered = Path(__file__).parents[1] / "scripts" / "tampered_solvers"  # a sitecustomize.py
    path = os.pathsep.join(filter(None, [str(tampered), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SOLVER_NAN": f"1:{STEPS - 1}", "PYTHONPATH": path}
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

    Oracle: the hang's start, written by the solver itself (the system-wide monotonic
    clock), and the death of its process, seen here: at most the floor plus a generous
    slack apart (a bound on an ordering of events, not a speed). With one job at a time
    and the hang after the first message, no silence between two messages can have been
    seen when it hangs (the case where the start-up bound applied)."""
    out, hang = tmp_path / "out", tmp_path / "hang.json"
    floor, slack = 3.0, 45.0  # (slack: a busy 2-core machine; the start-up bound is 600 s)
    tampered = Path(__file__).parents[1] / "scripts" / "tampered_solvers"  # a sitecustomize.py
    path = os.pathsep.join(filter(None, [str(tampered), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path,
           "SOLVER_HANG": f"0:1:{hang}"}  # fmt: skip
    n = 3
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--num_simulations", str(n), "--job_limit", "1",
           "--silence_floor", str(floor), "--no_plot", "--output_dir", str(out)]  # fmt: skip
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
            limit = began["monotonic"] + floor + slack
            while live(began["pid"]) and time.monotonic() < limit:
                time.sleep(0.05)
            killed = time.monotonic()
            assert not live(began["pid"]), (
                f"the hung solver still runs {killed - began['monotonic']:.0f} s after its "
                f"hang began (silence_floor {floor} s)"
            )
            assert killed - began["monotonic"] <= floor + slack
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


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_seeds_runs_the_study_once_per_seed_and_reports_the_spread(tmp_path: Path) -> None:
    """`--seeds 2` (issue 44: two seeds of the default run differed 2x): the study run
    with seeds 3 and 4, each in its own output directory, each seed's error printed and
    the spread of the two; the numbers are each run's own summary's."""
    out = tmp_path / "out"
    flags = ["--num_simulations", "3", "--time_steps", "6", "--grid_size", "6",
             "--job_limit", "2", "--num_validation", "1", "--hidden", "8", "--no_plot",
             "--buffer_size", "32", "--watermark", "4", "--batch_size", "4",
             "--eval_steps", "none", "--disable_progress_bar", "--seed", "3", "--seeds", "2",
             "--json"]  # fmt: skip
    cmd = [sys.executable, str(EXAMPLE), *flags, "--output_dir", str(out)]
    proc = run_group(cmd, timeout=200, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert [run["seed"] for run in report["seeds"]] == [3, 4]
    values = [run["val_mse"] for run in report["seeds"]]
    for run in report["seeds"]:  # each seed's own run, in its own directory
        saved = json.loads(next((out / f"seed-{run['seed']}" / "checkpoints").glob(
            "checkpoint-*/training_args.json")).read_text())  # fmt: skip
        assert saved["seed"] == run["seed"]
    assert report["min"] == min(values) and report["max"] == max(values)
    for run in report["seeds"]:  # each seed's worst held-out simulation, for an A/B
        # (of 1 held-out simulation: its error, the mean's up to rounding)
        assert run["val_mse_max"] == pytest.approx(run["val_mse"], rel=1e-5)
        assert (
            f"seed {run['seed']}: val_mse {run['val_mse']:.4g}, worst held-out "
            f"simulation {run['val_mse_max']:.4g}" in proc.stdout
        )
    assert report["spread"] == pytest.approx(max(values) / min(values))
    assert "over 2 seeds (3..4)" in proc.stdout and "max/min" in proc.stdout
