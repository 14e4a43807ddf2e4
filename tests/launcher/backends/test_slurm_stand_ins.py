"""`SlurmBackend` against stand-in Slurm commands (`fake_slurm`): its configuration
errors, its polling (with a cache) and exit files, sbatch's refusals, srun mode, a killed
srun step, and what `begin_study` cancels and removes of an earlier run."""

from __future__ import annotations

import os
import signal
import stat
import sys
from pathlib import Path

import pytest
from slurm_jobs import finish, pgrep
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, LaunchError, SlurmBackend, make_backend
from melissa_trainer.launcher.backends.base import unbuffered_env
from melissa_trainer.launcher.backends.slurm import script as ss

PYTHON = sys.executable


FAKE = {
    # sbatch --parsable SCRIPT: keeps the script, prints an id, or fails like sbatch
    "sbatch": """#!/bin/bash
if [ -e "$FAKE/refuse" ]; then
    echo "sbatch: error: invalid partition specified: nope" >&2
    exit 1
fi
cp "${@: -1}" "$FAKE/submitted.sbatch"
echo "$@" > "$FAKE/sbatch.args"
env > "$FAKE/sbatch.env"
echo "4242;testcluster"
""",
    # squeue: counts its calls, prints the state file
    "squeue": """#!/bin/bash
echo "$@" >> "$FAKE/squeue.calls"
if [ "$2" == "-u" ]; then cat "$FAKE/own" 2>/dev/null; else cat "$FAKE/state" 2>/dev/null; fi
""",
    "scancel": """#!/bin/bash
echo "$@" >> "$FAKE/scancel.calls"
echo "4242|CANCELLED" > "$FAKE/state"
""",
    # accounting and the controller's record know nothing (hermetic where Slurm is installed)
    "sacct": "#!/bin/bash\nexit 1\n",
    "scontrol": "#!/bin/bash\nexit 1\n",
    # srun OPTIONS... COMMAND: records the options, runs the command in its place
    "srun": """#!/bin/bash
while [[ "$1" == -* ]]; do echo "$1" >> "$FAKE/srun.options"; shift; done
exec "$@"
""",
}


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with stand-ins for sbatch, squeue, scancel and srun (sacct and scontrol
    that know no job)."""
    bin_dir, state = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in FAKE.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE", str(state))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return state


def test_slurm_backend_configuration_errors(
    fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = make_backend("slurm", partition="gpu", time_limit="1:00:00", poll_every=1.0)
    assert isinstance(backend, SlurmBackend) and backend.time_limit == "1:00:00"
    with pytest.raises(ValueError, match="mode must be 'sbatch' or 'srun'"):
        SlurmBackend(mode="qsub")
    with pytest.raises(ValueError, match="time_limit"):
        SlurmBackend(time_limit="soon")
    with pytest.raises(ValueError, match="poll_every"):
        SlurmBackend(poll_every=-1)
    with pytest.raises(ValueError, match="partition applies to mode='sbatch'"):
        SlurmBackend(mode="srun", partition="gpu")
    with pytest.raises(TypeError, match="extra_args"):
        SlurmBackend(extra_args="--mem=4G")
    with pytest.raises(LaunchError, match="SLURM_JOB_ID is not set.*salloc"):
        SlurmBackend(mode="srun")
    monkeypatch.setenv("PATH", str(fake_slurm))  # nothing there
    with pytest.raises(LaunchError, match="needs sbatch, squeue, scancel on PATH.*slurm-client"):
        SlurmBackend()


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_slurm_backend_polls_with_a_cache_and_reads_the_exit_file(
    fake_slurm: Path, tmp_path: Path
) -> None:
    backend = SlurmBackend(partition="debug", time_limit=5, poll_every=0.5)
    job = Job(
        "sim-1",
        ["/bin/true"],
        env={"A": "1"},
        cwd=tmp_path,
        log_path=tmp_path / "logs" / "sim-1.log",
    )
    (fake_slurm / "state").write_text("4242|PENDING\n")
    handle = backend.launch(job)
    assert backend.describe(handle) == "sim-1 (Slurm job 4242)"
    submitted = (fake_slurm / "submitted.sbatch").read_text()
    assert "#SBATCH --partition=debug" in submitted and "#SBATCH --time=5" in submitted
    assert (tmp_path / "logs" / "sim-1.sbatch").exists()  # default script_dir: the log's
    for _ in range(20):  # polls in a burst: squeue runs once
        assert backend.poll(handle) is None
    assert (fake_slurm / "squeue.calls").read_text().splitlines() == [
        "-h -t all -j 4242 -o %i|%T|%r|%N|%S"
    ]
    # the job ends: its script wrote the exit code; squeue reports it failed
    (tmp_path / "logs" / ss.exit_file("sim-1", "4242")).write_text("7\n")
    (fake_slurm / "state").write_text("4242|FAILED\n")
    wait_until(lambda: backend.poll(handle) is not None, "the job's end", UNTIL_TEST_TIMEOUT)
    assert backend.poll(handle) == 7
    assert not (tmp_path / "logs" / ss.exit_file("sim-1", "4242")).exists()  # consumed
    calls = len((fake_slurm / "squeue.calls").read_text().splitlines())
    backend.poll(handle)
    backend.kill(handle)  # an ended job: nothing to cancel
    backend.close()
    assert len((fake_slurm / "squeue.calls").read_text().splitlines()) == calls
    assert not (fake_slurm / "scancel.calls").exists()


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_slurm_backend_without_exit_file_uses_the_state(fake_slurm: Path, tmp_path: Path) -> None:
    """A job killed before its command ended writes no exit file; without sacct and
    scontrol, its final state decides: CANCELLED, of a job seen running, reads as the
    SIGTERM a scancel sends (143, `exit_code.CANCELLED_CODE`; it read 1, a solver's own
    failure). kill() of a running job signals it (SIGTERM) and, as it ends within the
    grace, needs no more."""
    backend = SlurmBackend(script_dir=tmp_path / "scripts", poll_every=0)
    (fake_slurm / "state").write_text("4242|RUNNING\n")
    handle = backend.launch(Job("sim-2", ["/bin/sleep", "100"], cwd=tmp_path))
    assert backend.poll(handle) is None
    assert (tmp_path / "scripts" / "sim-2.sbatch").exists()
    backend.kill(handle, grace=5)
    calls = ["--full --signal=TERM 4242"]
    assert (fake_slurm / "scancel.calls").read_text().splitlines() == calls
    assert backend.poll(handle) == 143
    backend.close()
    assert (fake_slurm / "scancel.calls").read_text().splitlines() == calls


@pytest.mark.e2e
def test_slurm_backend_reports_sbatch_errors(fake_slurm: Path, tmp_path: Path) -> None:
    backend = SlurmBackend(partition="nope")
    (fake_slurm / "refuse").touch()
    with pytest.raises(
        LaunchError, match="sbatch refused job sim-3.*invalid partition specified: nope"
    ):
        backend.launch(Job("sim-3", ["/bin/true"], cwd=tmp_path))
    with pytest.raises(LaunchError, match="is not valid"):
        backend.launch(Job("sim-4", ["/bin/true"], env={"1X": "y"}, cwd=tmp_path))


@pytest.mark.e2e
@pytest.mark.timeout(150)
def test_slurm_srun_mode_runs_steps_as_local_processes(
    fake_slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In an allocation (SLURM_JOB_ID), a job is a local `srun ... argv` process: its exit
    code passes through; kill ends it and what it started."""
    monkeypatch.setenv("SLURM_JOB_ID", "99")
    backend = SlurmBackend(mode="srun", time_limit="00:05:00", srun_args=["--mpi=pmi2"])
    done = backend.launch(Job("sim-5", [PYTHON, "-c", "raise SystemExit(4)"], ranks=2))
    assert finish(backend, done) == 4
    options = (fake_slurm / "srun.options").read_text().split()
    assert options == [
        "--ntasks=2", "--exclusive", "--job-name=mt-sim-5", "--kill-on-bad-exit=1",
        "--time=00:05:00", "--mpi=pmi2",
    ]  # fmt: skip
    marker = f"melissa-srun-kill-{os.getpid()}"
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', sys.argv[1]]); "
        "time.sleep(60)"
    )
    handle = backend.launch(Job("sim-6", [PYTHON, "-c", code, marker]))
    try:
        wait_until(lambda: len(pgrep(marker)) >= 2, "the step and its child", 60)
        assert backend.poll(handle) is None and "srun step mt-sim-6" in backend.describe(handle)
        backend.kill(handle, grace=2)
        assert backend.poll(handle) not in (None, 0)
        wait_until(lambda: not pgrep(marker), "no process left", 60)
    finally:
        backend.close()


SRUN_TIMED_OUT = """
import pathlib, signal, sys, time
def timed_out(*_):  # as srun whose step did not answer in time: no task status, exit 0
    print("srun: error: Timed out waiting for job step to complete", file=sys.stderr)
    sys.exit(0)
signal.signal(signal.SIGTERM, timed_out)
pathlib.Path(sys.argv[1]).touch()  # (the handler is in place)
time.sleep(60)
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_killed_srun_step_never_reports_success_though_srun_exits_0(
    fake_slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """srun exits 0 after its SIGTERM when its tasks' end was not reported within its
    wait (a slurmstepd slow to answer: the flake of test_slurm's srun test, reproduced
    there with the step's slurmstepd stopped); the fake srun here exits 0 on SIGTERM
    likewise. The step was killed: `poll` reports 137 (as srun does for tasks it ended
    with SIGKILL), not success. A step that exits 0 by itself still reports 0."""
    monkeypatch.setenv("SLURM_JOB_ID", "99")
    backend = SlurmBackend(mode="srun")
    ready = tmp_path / "ready"
    try:
        ok = backend.launch(Job("sim-1", [PYTHON, "-c", "pass"]))
        assert finish(backend, ok) == 0
        backend.kill(ok, grace=2)  # ended already: its own code stays
        assert backend.poll(ok) == 0
        handle = backend.launch(Job("sim-2", [PYTHON, "-c", SRUN_TIMED_OUT, str(ready)]))
        wait_until(ready.exists, "the stand-in's SIGTERM handler", 60)
        backend.kill(handle, grace=5)
        assert handle.process.process.returncode == 0  # what srun said
        assert backend.poll(handle) == 128 + signal.SIGKILL
        assert backend.poll(handle) == 128 + signal.SIGKILL  # (again: the same)
    finally:
        backend.close()


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_slurm_backend_begin_study_cancels_the_earlier_run_and_names_jobs(
    fake_slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """begin_study: this user's live jobs named mt-<study>-* are cancelled (running ones
    signalled first), no other; later jobs are named after the study, submitted with
    --export=ALL from an environment without the enclosing allocation's variables, and
    get a lease file of this run (those of earlier runs of the study are removed), which
    close() removes."""
    (fake_slurm / "own").write_text(
        "7|RUNNING|mt-ab12-sim-1\n"
        "8|PENDING|mt-ab12-worker-0\n"
        "9|RUNNING|mt-ab123-sim-1\n"  # another study whose id starts alike
        "10|RUNNING|sim-1\n"
        "11|COMPLETED|mt-ab12-sim-2\n"  # already over
    )
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path / "scripts", lease_timeout=60)
    with pytest.raises(ValueError, match="no '-'"):
        backend.begin_study("ab-12")
    backend.begin_study("ab12")
    assert (fake_slurm / "squeue.calls").read_text().splitlines()[0] == (
        f"-h -u {os.getuid()} -o %i|%T|%j"
    )
    assert (fake_slurm / "scancel.calls").read_text().splitlines() == [
        "--full --signal=TERM 7",
        "8",
    ]
    monkeypatch.setenv("SLURM_JOB_ID", "555")
    monkeypatch.setenv("SLURM_NTASKS", "64")
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/test.conf")
    (fake_slurm / "state").write_text("4242|RUNNING\n")
    (tmp_path / "scripts").mkdir()
    earlier_lease = tmp_path / "scripts" / "mt-ab12-1234abcd.lease"  # a killed run's
    other_lease = tmp_path / "scripts" / "mt-ab123-1234abcd.lease"  # another study's
    for path in (earlier_lease, other_lease):
        path.write_text("1 2")
    handle = backend.launch(Job("sim-3", ["/bin/true"], env={"A": "1"}, cwd=tmp_path))
    submitted = (fake_slurm / "submitted.sbatch").read_text()
    assert "#SBATCH --job-name=mt-ab12-sim-3" in submitted
    assert (fake_slurm / "sbatch.args").read_text().split()[:2] == ["--parsable", "--export=ALL"]
    env = (fake_slurm / "sbatch.env").read_text().splitlines()
    assert "SLURM_CONF=/etc/slurm/test.conf" in env and "FAKE=" + str(fake_slurm) in env
    assert not [line for line in env if line.startswith(("SLURM_JOB_ID=", "SLURM_NTASKS="))]
    [lease] = (tmp_path / "scripts").glob("mt-ab12-*.lease")  # this run's only
    assert f"lease={lease}" in submitted and lease.read_text()
    assert not earlier_lease.exists() and other_lease.exists()
    backend.close()
    assert backend.poll(handle) is not None
    assert not lease.exists()


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_slurm_backend_removes_the_exit_files_an_earlier_run_of_the_study_left(
    fake_slurm: Path, tmp_path: Path
) -> None:
    """The exit files nobody will consume (an earlier run's jobs, cancelled or ended
    unwatched) go at the run's first launch into their directory; another study's, and
    files of no study, stay (tests/launcher/backends/test_slurm.py runs the real case)."""
    (fake_slurm / "own").write_text("")  # no job of the earlier run left in the queue
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    earlier = [scripts / "mt-ab12-sim-0.11.exit", scripts / "mt-ab12-worker-1.12.exit.tmp"]
    kept = [
        scripts / "mt-ab123-sim-0.13.exit",  # another study, whose id starts alike
        scripts / "sim-0.14.exit",  # no study's
        scripts / "mt-ab12-sim-0.exits",  # not an exit file
    ]
    for path in (*earlier, *kept):
        path.write_text("143\n")
    backend = SlurmBackend(poll_every=0, script_dir=scripts, lease_timeout=None)
    backend.begin_study("ab12")
    (fake_slurm / "state").write_text("4242|RUNNING\n")
    handle = backend.launch(Job("sim-3", ["/bin/true"], cwd=tmp_path))
    assert [p for p in earlier if p.exists()] == [] and all(p.exists() for p in kept)
    assert '/mt-ab12-sim-3."$SLURM_JOB_ID".exit' in (fake_slurm / "submitted.sbatch").read_text()
    assert (scripts / "sim-3.sbatch").exists()  # the script keeps the job's own name
    # this run's job ends: its exit file (named after the study) is consumed
    (scripts / "mt-ab12-sim-3.4242.exit").write_text("5\n")
    (fake_slurm / "state").write_text("4242|FAILED\n")
    assert backend.poll(handle) == 5
    assert not (scripts / "mt-ab12-sim-3.4242.exit").exists()
    backend.close()


def test_a_time_limit_of_two_fields_is_said_in_words_as_the_backend_is_made(
    fake_slurm: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "01:30" meant as an hour and a half is 90 s to Slurm (MM:SS): every simulation was
    # ended at its limit, said only then (before: nothing said as the backend was made)
    with caplog.at_level("WARNING", logger="melissa_trainer.launcher"):
        backend = SlurmBackend(time_limit="01:30")
    assert backend.time_limit == "01:30"  # (valid Slurm: passed as given)
    said = [r.getMessage() for r in caplog.records if "time_limit" in r.getMessage()]
    assert len(said) == 1, said
    assert "'01:30' is minutes:seconds to Slurm: 1 min 30 s per job, not 1 h 30 min" in said[0]
    assert "('01:30:00')" in said[0] and "'0:01:30' says so" in said[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="melissa_trainer.launcher"):
        for limit in ("01:30:00", "0:01:30", 90, "30", "2-00:30", "1:75"):
            SlurmBackend(time_limit=limit)
    assert not [r for r in caplog.records if "time_limit" in r.getMessage()]
    assert ss.minutes_seconds_note("90:00") is not None and "1 h 30 min 0 s" in str(
        ss.minutes_seconds_note("90:00")
    )


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_an_srun_steps_python_lines_reach_its_log_before_a_sigkill(
    fake_slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mode "srun": the step runs with PYTHONUNBUFFERED=1 as a batch job does
    (test_slurm.py::test_a_python_solvers_lines_reach_its_log_before_a_sigkill); a value
    the job sets is kept. Failed before: the log was empty."""
    monkeypatch.setenv("SLURM_JOB_ID", "99")
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    backend = SlurmBackend(mode="srun")
    code = "import os, signal; print('step', 0, 'sent'); os.kill(os.getpid(), signal.SIGKILL)"
    log = tmp_path / "sim.log"
    handle = backend.launch(Job("sim-7", [PYTHON, "-c", code], cwd=tmp_path, log_path=log))
    assert finish(backend, handle) != 0
    assert "step 0 sent" in log.read_text(), log.read_text()
    assert unbuffered_env({"A": "1"}, {}) == {"PYTHONUNBUFFERED": "1", "A": "1"}
    assert unbuffered_env({"PYTHONUNBUFFERED": "0"}, {}) == {"PYTHONUNBUFFERED": "0"}
    assert unbuffered_env({}, {"PYTHONUNBUFFERED": ""}) == {}  # (the trainer's, inherited)
    backend.close()
