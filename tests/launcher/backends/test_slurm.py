"""The Slurm backend against a real single-node Slurm cluster (tests/slurm_cluster.py),
started once for this module: batch jobs' exit codes, environment, kill and close, a
2-task MPI job, sbatch's refusals, and srun steps inside an allocation. Studies on Slurm
and the jobs of a SIGKILLed trainer: test_slurm_study.py."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, PYTHON, finish, pgrep, queue
from test_slurm_srun_segments import in_allocation
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, LaunchError, SlurmBackend

#: pytest-xdist: this module's tests on one worker, which starts the module's one cluster
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]


@pytest.fixture
def backend(slurm_cluster: SlurmCluster, tmp_path: Path):  # type: ignore[no-untyped-def]  # noqa: F811
    backend = SlurmBackend(poll_every=POLL, time_limit=5, script_dir=tmp_path / "scripts")
    yield backend
    backend.close()


@pytest.mark.timeout(120)
def test_jobs_exit_codes_environment_and_log(backend: SlurmBackend, tmp_path: Path) -> None:
    tricky = "a b 'c' \"d\" $HOME"
    code = (
        "import os, sys; print('out of', os.environ['SLURM_JOB_ID'], flush=True); "
        "open('env.txt', 'w').write(os.environ['MELISSA_TEST_VALUE']); "
        "sys.exit(int(sys.argv[1]))"
    )
    log = tmp_path / "logs" / "sim.log"
    ok = backend.launch(
        Job("sim-0", [PYTHON, "-c", code, "0"], {"MELISSA_TEST_VALUE": tricky}, tmp_path, log)
    )
    assert finish(backend, ok) == 0
    assert (tmp_path / "env.txt").read_text() == tricky  # ran in cwd, variable intact
    bad = backend.launch(
        Job("sim-0-r1", [PYTHON, "-c", code, "3"], {"MELISSA_TEST_VALUE": "x"}, tmp_path, log)
    )
    assert finish(backend, bad) == 3
    assert backend.poll(bad) == 3  # stays known
    # both runs appended their output to the same log; the exit files were consumed
    assert log.read_text().count("out of") == 2, log.read_text()
    assert not list((tmp_path / "scripts").glob("*.exit"))
    assert sorted(p.name for p in (tmp_path / "scripts").glob("*.sbatch")) == [
        "sim-0-r1.sbatch",
        "sim-0.sbatch",
    ]


#: a Python solver that prints a line and dies without a flush (as on a node that vanished:
#: every process there SIGKILLed); the line is not its command's text, which bash's
#: "Killed" line in the log quotes
PRINTS_THEN_DIES = (
    "import os, signal; print('step', 0, 'sent'); os.kill(os.getpid(), signal.SIGKILL)"
)


@pytest.mark.timeout(120)
def test_a_python_solvers_lines_reach_its_log_before_a_sigkill(
    backend: SlurmBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's stdout is its log, a file, where Python buffers in blocks: the job runs with
    PYTHONUNBUFFERED=1 (`base.unbuffered_env`). Failed before: the line was lost (a log
    found empty after a node vanished mid-study, a user trial on the two-node cluster)."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # (the job inherits the trainer's)
    log = tmp_path / "logs" / "sim.log"
    job = Job("sim-0", [PYTHON, "-c", PRINTS_THEN_DIES], cwd=tmp_path, log_path=log)
    assert finish(backend, backend.launch(job)) == 128 + signal.SIGKILL
    assert "step 0 sent" in log.read_text(), log.read_text()


@pytest.mark.timeout(120)
def test_kill_ends_the_job_and_its_processes(backend: SlurmBackend, tmp_path: Path) -> None:
    marker = f"melissa-slurm-kill-{os.getpid()}"
    code = (  # the job ignores SIGTERM: only the forced kill after the grace ends it
        "import signal, subprocess, sys, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]]); "
        "time.sleep(300)"
    )
    handle = backend.launch(Job("long", [PYTHON, "-c", code, marker], cwd=tmp_path))
    wait_until(lambda: len(pgrep(marker)) >= 2, "the job and its child to run", 30, interval=0.1)
    assert backend.poll(handle) is None
    backend.kill(handle, grace=1)
    assert backend.poll(handle) not in (None, 0)
    assert not pgrep(marker), "a process of the killed job survived"
    assert "long" not in queue()
    backend.kill(handle)  # idempotent


@pytest.mark.timeout(120)
def test_close_cancels_running_and_pending_jobs(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two jobs that each want the whole node (--exclusive): one runs, one waits in the
    queue; close() ends both."""
    marker = f"melissa-slurm-close-{os.getpid()}"
    backend = SlurmBackend(poll_every=POLL, extra_args=["--exclusive"], script_dir=tmp_path)
    sleeper = [PYTHON, "-c", "import time; time.sleep(300)", marker]
    try:
        running = backend.launch(Job("close-0", sleeper, cwd=tmp_path))
        wait_until(lambda: len(pgrep(marker)) == 1, "the first job to run", 30, interval=0.1)
        pending = backend.launch(Job("close-1", sleeper, cwd=tmp_path))
        wait_until(
            lambda: "close-1 PENDING" in queue(), "the second job to queue", 30, interval=0.1
        )
    finally:
        backend.close()
    assert backend.poll(running) == 143  # SIGTERM, as the job's script recorded it
    assert backend.poll(pending) == 1  # cancelled before it started
    assert not pgrep(marker)
    assert "close-" not in queue()
    backend.close()  # idempotent


RANKS = """
import os, sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
with open(f"rank{comm.Get_rank()}", "w") as f:
    f.write(f"{comm.Get_rank()} {comm.Get_size()} {os.environ['SLURM_PROCID']}")
"""


@pytest.mark.timeout(120)
def test_two_task_mpi_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; a 2-task job needs 2")
    pytest.importorskip("mpi4py")
    (tmp_path / "ranks.py").write_text(RANKS)
    backend = SlurmBackend(poll_every=POLL, srun_args=["--mpi=pmi2"])
    try:
        log = tmp_path / "mpi.log"
        handle = backend.launch(
            Job("mpi", [PYTHON, "ranks.py"], cwd=tmp_path, log_path=log, ranks=2)
        )
        assert finish(backend, handle) == 0, log.read_text()
    finally:
        backend.close()
    assert (tmp_path / "rank0").read_text() == "0 2 0"
    assert (tmp_path / "rank1").read_text() == "1 2 1"
    assert "#SBATCH --ntasks=2" in (tmp_path / "mpi.sbatch").read_text()


@pytest.mark.timeout(120)
def test_sbatch_refusal_is_a_launch_error(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    """A partition this cluster lacks (the guide's "cpu" copied as is): sbatch's words,
    then the partitions there are (the cluster's own, its default starred) and the fix."""
    backend = SlurmBackend(partition="no-such-partition", script_dir=tmp_path)
    with pytest.raises(LaunchError, match="sbatch refused job x.*invalid partition") as raised:
        backend.launch(Job("x", ["/bin/true"], cwd=tmp_path))
    backend.close()
    assert str(raised.value).endswith(
        f"\nthis cluster's partitions (sinfo; * marks the default): {slurm_cluster.partition}*: "
        "name one with SlurmBackend(partition=...), or leave partition=None for the default"
    )


@pytest.mark.timeout(120)
def test_another_sbatch_refusal_gets_no_partition_hint(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    backend = SlurmBackend(extra_args=["--mem=100000G"], script_dir=tmp_path)
    with pytest.raises(LaunchError, match="sbatch refused job x") as raised:
        backend.launch(Job("x", ["/bin/true"], cwd=tmp_path))
    backend.close()
    assert "partitions" not in str(raised.value)


SRUN_DRIVER = """
import json, os, signal, subprocess, sys, time
from melissa_trainer.launcher.backends import Job, SlurmBackend

marker = sys.argv[1]


def wait_listed(handle):
    # until slurmctld lists the step in this allocation: a fixed sleep could end before
    # srun registered it (a loaded machine), and begin_study would not see it to cancel;
    # returns its step id
    listing = ["squeue", "-h", "-s", "-j", os.environ["SLURM_JOB_ID"], "-o", "%i %j"]
    deadline = time.monotonic() + 30
    while True:
        lines = subprocess.run(listing, capture_output=True, text=True).stdout.splitlines()
        listed = {name: step for step, name in (line.split() for line in lines)}
        if handle.step_name in listed:
            return listed[handle.step_name]
        assert time.monotonic() < deadline, f"step {handle.step_name} never listed: {listed}"
        time.sleep(0.1)


def step_daemons(step_id, task_args):
    # the slurmstepd of step_id on this cluster (its SLURM_CONF), once its task runs
    # (the process whose command line starts with task_args, NUL-separated as in /proc)
    def read(pid, what):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as file:
                return file.read()
        except OSError:
            return b""
    head, task = f"slurmstepd: [{step_id}]".encode(), "\\0".join(task_args).encode()
    conf = os.environ["SLURM_CONF"].encode()
    deadline = time.monotonic() + 30
    while True:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        daemons = [
            int(p)
            for p in pids
            if read(p, "cmdline").startswith(head) and conf in read(p, "environ")
        ]
        if daemons and any(read(p, "cmdline").startswith(task) for p in pids):
            return daemons
        assert time.monotonic() < deadline, f"step {step_id}: no slurmstepd and task"
        time.sleep(0.1)


backend = SlurmBackend(mode="srun")
out = {}
handle = backend.launch(Job("step-exit", [sys.executable, "-c", "raise SystemExit(5)"]))
while (code := backend.poll(handle)) is None:
    time.sleep(0.05)
out["exit"] = code
sleeper = [sys.executable, "-c", "import time; time.sleep(300)", marker]
handle = backend.launch(Job("step-long", sleeper))
wait_listed(handle)
out["running"] = backend.poll(handle)
backend.kill(handle, grace=5)
out["killed"] = backend.poll(handle)
# A step whose slurmstepd does not answer srun in time (stopped here; slow on a loaded
# node): srun, killed, waits KillWait + 2 s for its task's end, times out and exits 0.
# The step was killed all the same: the backend must not report success.
mute = [*sleeper, "mute"]
handle = backend.launch(Job("step-mute", mute, log_path="mute.log"))
daemons = step_daemons(wait_listed(handle), mute)
for pid in daemons:
    os.kill(pid, signal.SIGSTOP)
try:
    # (srun ends before the grace, on its own timeout: KillWait + 2 s, but a loaded
    # machine has stretched that past 30 s, and a SIGKILLed srun tests nothing here)
    backend.kill(handle, grace=120)
finally:
    for pid in daemons:
        os.kill(pid, signal.SIGCONT)
out["mute_srun"] = handle.process.process.returncode
out["mute_killed"] = backend.poll(handle)
out["mute_log"] = open("mute.log").read()
backend.close()
# a study restarted in the same allocation cancels the steps of its earlier run
earlier = SlurmBackend(mode="srun")
earlier.begin_study("srunstudy")
orphan = earlier.launch(Job("orphan", sleeper))
wait_listed(orphan)
restarted = SlurmBackend(mode="srun")
restarted.begin_study("srunstudy")
deadline = time.monotonic() + 30
while (code := earlier.poll(orphan)) is None and time.monotonic() < deadline:
    time.sleep(0.1)
out["reaped"] = code
earlier.close()
restarted.close()
print(json.dumps(out))
"""


@pytest.mark.timeout(360)
def test_srun_mode_runs_steps_in_an_allocation(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    """A driver run by salloc (so inside an allocation) uses mode="srun"; a backend that
    begins the same study cancels the steps of the earlier one."""
    marker = f"melissa-srun-step-{os.getpid()}"
    out, stderr = in_allocation(tmp_path, SRUN_DRIVER, 1, marker, timeout=300)
    assert out["exit"] == 5 and out["running"] is None
    assert out["killed"] not in (None, 0)
    # srun said 0, having heard of no task (its log says why); the kill is reported
    assert "Timed out waiting for job step to complete" in out["mute_log"], out["mute_log"]
    assert out["mute_srun"] == 0 and out["mute_killed"] == 128 + signal.SIGKILL
    assert out["reaped"] not in (None, 0), stderr
    assert not pgrep(marker)


ENV_DUMP = "import json, os; json.dump(dict(os.environ), open('env.json', 'w'))"


@pytest.mark.timeout(120)
def test_job_environment_is_the_trainers_without_its_allocation(
    backend: SlurmBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trainer inside an allocation: its SLURM_*/SRUN_* variables do not reach the job,
    which has Slurm's own; the trainer's other variables and the job's do; the job's
    name carries the study."""
    backend.begin_study("envstudy")
    planted = {
        "SLURM_JOB_ID": "999999",
        "SLURM_NTASKS": "7",
        "SLURM_CPUS_PER_TASK": "5",
        "SLURM_MEM_PER_CPU": "1",
        "SRUN_CPUS_PER_TASK": "5",
        "MELISSA_TEST_DOCUMENTED": "from the trainer",
    }
    for key, value in planted.items():
        monkeypatch.setenv(key, value)
    handle = backend.launch(
        Job("env", [PYTHON, "-c", ENV_DUMP], {"MELISSA_TEST_JOB": "x y"}, tmp_path)
    )
    assert finish(backend, handle) == 0
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["SLURM_JOB_ID"] == handle.job_id  # type: ignore[attr-defined]
    assert env["SLURM_JOB_NAME"] == "mt-envstudy-env"
    assert env.get("SLURM_NTASKS", "1") == "1"
    for key in ("SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_CPU", "SRUN_CPUS_PER_TASK"):
        assert key not in env, f"{key}={env[key]} leaked from the trainer's allocation"
    assert env["MELISSA_TEST_DOCUMENTED"] == "from the trainer"
    assert env["MELISSA_TEST_JOB"] == "x y"
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == os.environ["HOME"]
    assert env["SLURM_CONF"] == os.environ["SLURM_CONF"]
