"""`make_backend`, and the mpiexec backend: its command line and configuration errors,
real 2-rank MPI jobs (one streams a decomposed field to a receiver), and its kill, which
leaves no rank (those in sessions of their own too; one scan of /proc for a stop's jobs)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import NO_MPI, find_mpiexec, mpich_wheel_mpiexec
from slurm_jobs import finish, pgrep
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher.backends import (
    Job,
    LaunchError,
    LocalBackend,
    MpiexecBackend,
    make_backend,
)
from melissa_trainer.launcher.backends import mpiexec as mpiexec_module
from melissa_trainer.launcher.backends.mpiexec import mpiexec_command, process_tree
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

PYTHON = sys.executable
MPIEXEC = find_mpiexec()
HAVE_MPI = MPIEXEC is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason=NO_MPI)


def mpi_backend() -> MpiexecBackend:
    assert MPIEXEC is not None
    return MpiexecBackend(MPIEXEC)


@pytest.mark.skipif(not HAVE_MPI or mpich_wheel_mpiexec() is None, reason="needs the mpich wheel")
def test_mpi_tests_prefer_the_mpich_wheel_over_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unrelated mpiexec first on PATH (a system Open MPI) is not the one MPI tests use."""
    other = tmp_path / "mpiexec"
    other.write_text("#!/bin/sh\nexit 1\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert find_mpiexec.__wrapped__() == MPIEXEC != str(other)


# -- make_backend ---------------------------------------------------------------------


def test_make_backend_by_name_and_bad_options() -> None:
    assert isinstance(make_backend("local"), LocalBackend)
    if HAVE_MPI:
        backend = make_backend("mpiexec", mpiexec=MPIEXEC, extra_args=["-bind-to", "none"])
        assert isinstance(backend, MpiexecBackend) and backend.extra_args == ("-bind-to", "none")
    with pytest.raises(ValueError, match="unknown launcher backend 'pbs'.*local, mpiexec, slurm"):
        make_backend("pbs")
    with pytest.raises(ValueError, match="'local' does not take ranks"):
        make_backend("local", ranks=2)
    with pytest.raises(ValueError, match="'mpiexec' does not take partition.*mpiexec, extra_args"):
        make_backend("mpiexec", partition="gpu")


# -- mpiexec --------------------------------------------------------------------------


def test_mpiexec_command_and_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    assert mpiexec_command("/x/mpiexec", 2, ["a", "b c"], ["-v"]) == [
        "/x/mpiexec", "-n", "2", "-v", "a", "b c",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="ranks must be >= 1"):
        mpiexec_command("mpiexec", 0, ["a"])
    with pytest.raises(LaunchError, match="pip install mpich"):
        MpiexecBackend("no-such-mpiexec-here")
    with pytest.raises(TypeError, match="sequence of arguments"):
        MpiexecBackend(extra_args="-v")


RANK_SCRIPT = """
import os, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
out = sys.argv[1]
with open(os.path.join(out, f"rank{comm.Get_rank()}"), "w") as f:
    f.write(f"{comm.Get_rank()} {comm.Get_size()} {os.environ['MELISSA_TEST_VALUE']}")
comm.Barrier()
"""


@pytest.mark.e2e
@needs_mpi
@pytest.mark.timeout(60)
def test_mpiexec_runs_two_ranks(tmp_path: Path) -> None:
    (tmp_path / "ranks.py").write_text(RANK_SCRIPT)
    backend = mpi_backend()
    job = Job(
        "mpi-ranks",
        [PYTHON, str(tmp_path / "ranks.py"), str(tmp_path)],
        env={"MELISSA_TEST_VALUE": "a b'c"},
        log_path=tmp_path / "logs" / "mpi-ranks.log",
        ranks=2,
    )
    handle = backend.launch(job)
    try:
        assert "2 ranks" in backend.describe(handle)
        assert finish(backend, handle) == 0, (tmp_path / "logs" / "mpi-ranks.log").read_text()
    finally:
        backend.close()
    assert (tmp_path / "rank0").read_text() == "0 2 a b'c"
    assert (tmp_path / "rank1").read_text() == "1 2 a b'c"


@pytest.mark.e2e
@needs_mpi
@pytest.mark.timeout(60)
def test_mpiexec_ranks_lines_reach_the_log_before_a_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank prints a line and is SIGKILLed without a flush: the ranks run with
    PYTHONUNBUFFERED=1 (`Job.full_env`, passed through mpiexec), so both lines reach the
    job's log. Failed before: the log held neither (only mpiexec's own words)."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # (the job inherits the trainer's)
    # each rank's line written (one write) before either dies: mpiexec ends the other
    # rank at the first one's death, which under load came before its print
    code = (
        "import os, signal; from mpi4py import MPI; "
        "print(f\"rank {os.environ.get('PMI_RANK')} sent\"); MPI.COMM_WORLD.Barrier(); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    log = tmp_path / "logs" / "mpi-dies.log"
    backend = mpi_backend()
    try:
        handle = backend.launch(Job("mpi-dies", [PYTHON, "-c", code], log_path=log, ranks=2))
        assert finish(backend, handle) != 0
    finally:
        backend.close()
    text = log.read_text()
    assert "rank 0 sent" in text and "rank 1 sent" in text, text


STREAM_SCRIPT = """
import numpy as np
from mpi4py import MPI
from melissa_trainer.client import Client

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
full = lambda step: np.arange(12, dtype=np.float64).reshape(3, 4) * 10 + step
with Client({"u": ((3, 4), "float64")}, comm=comm, send_timeout=30) as client:
    for step in range(4):
        flat = full(step).reshape(-1)
        client.send(step, u=flat[:5] if rank == 0 else flat[5:])
comm.Barrier()
"""


@pytest.mark.e2e
@needs_mpi
@pytest.mark.timeout(90)
def test_mpiexec_job_streams_a_decomposed_field_to_a_receiver(tmp_path: Path) -> None:
    """Two ranks each send a part of `u`; the simulation id, parameters and rendezvous
    directory come from the job's environment, as the launcher sets them."""
    (tmp_path / "stream.py").write_text(STREAM_SCRIPT)
    buffer = FIFOBuffer(100)
    receiver = Receiver(
        buffer, config=ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path / "rdv")
    )
    receiver.start()
    backend = mpi_backend()
    try:
        job = Job(
            "sim-9",
            [PYTHON, str(tmp_path / "stream.py")],
            env={
                "MELISSA_TRAINER_SIMULATION_ID": "9",
                "MELISSA_TRAINER_PARAMETERS": json.dumps({"alpha": 0.5}),
                "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rdv"),
            },
            cwd=tmp_path,
            log_path=tmp_path / "sim-9.log",
            ranks=2,
        )
        handle = backend.launch(job)
        assert finish(backend, handle) == 0, (tmp_path / "sim-9.log").read_text()
        samples = []
        while len(samples) < 4:
            samples += buffer.get_batch(4 - len(samples), timeout=30)
    finally:
        backend.close()
        receiver.stop()
    receiver.check()
    assert receiver.finished_simulations() == [9]
    for sample in sorted(samples, key=lambda s: int(s["time_step"])):
        step = int(sample["time_step"])
        assert int(sample["simulation_id"]) == 9
        expected = np.arange(12, dtype=np.float64).reshape(3, 4) * 10 + step
        np.testing.assert_array_equal(sample["u"], expected)
    assert sorted(int(s["time_step"]) for s in samples) == [0, 1, 2, 3]


STUBBORN_SCRIPT = """
import os, signal, sys, time
from mpi4py import MPI
rank = MPI.COMM_WORLD.Get_rank()
if rank == 1:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends this one
path = os.path.join(sys.argv[1], f"pid{rank}")
with open(path + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(path + ".tmp", path)  # never seen empty by the test
time.sleep(600)
"""


@pytest.mark.e2e
@needs_mpi
@pytest.mark.timeout(150)
def test_mpiexec_kill_leaves_no_rank(tmp_path: Path) -> None:
    marker = f"melissa-mpi-kill-{os.getpid()}"
    (tmp_path / "stubborn.py").write_text(STUBBORN_SCRIPT)
    backend = mpi_backend()
    job = Job("mpi-kill", [PYTHON, str(tmp_path / "stubborn.py"), str(tmp_path), marker], ranks=2)
    handle = backend.launch(job)
    try:
        wait_until(
            lambda: (tmp_path / "pid0").exists() and (tmp_path / "pid1").exists(), "ranks", 30
        )
        pids = [int((tmp_path / f"pid{r}").read_text()) for r in (0, 1)]
        assert len(pgrep(marker)) >= 2
        assert backend.poll(handle) is None
        backend.kill(handle, grace=1.0)
        assert backend.poll(handle) not in (None, 0)
        wait_until(lambda: not pgrep(marker), f"no process with {marker}", 60)
        for pid in pids:
            assert (
                not Path(f"/proc/{pid}/cmdline").exists()
                or not Path(f"/proc/{pid}/cmdline").read_bytes()
            ), f"rank pid {pid} survived"
        backend.kill(handle)  # idempotent on an ended job
    finally:
        backend.close()
    assert not pgrep(marker)


#: "ranks" that ignore SIGTERM (`setsid_mpiexec` runs two, in sessions of their own)
STUBBORN_RANK = [PYTHON, "-c", "import signal, time; signal.signal(15, 1); time.sleep(60)"]


def setsid_mpiexec(tmp_path: Path) -> MpiexecBackend:
    """A backend whose mpiexec stand-in ignores SIGTERM and starts 2 "ranks" with setsid
    (as hydra does): out of reach of its process group's signal."""
    fake = tmp_path / "fake-mpiexec"
    fake.write_text(
        "#!/bin/bash\n"
        "trap '' TERM\n"
        "shift 2  # -n RANKS\n"
        'for _ in 1 2; do setsid "$@" & done\n'
        "wait\n"
    )
    fake.chmod(stat.S_IRWXU)
    return MpiexecBackend(str(fake))


@pytest.mark.e2e
@pytest.mark.timeout(150)
def test_mpiexec_kill_reaches_ranks_in_their_own_sessions(tmp_path: Path) -> None:
    """A launcher that ignores SIGTERM and starts its "ranks" with setsid (as hydra
    does): the SIGKILL of its process group misses them; kill() still ends them."""
    marker = f"melissa-setsid-rank-{os.getpid()}"
    backend = setsid_mpiexec(tmp_path)
    handle = backend.launch(Job("fake-mpi", [*STUBBORN_RANK, marker], ranks=2))
    try:
        wait_until(lambda: len(pgrep(marker)) == 3, "the launcher and both ranks", 60)
        backend.kill(handle, grace=0.5)
        assert backend.poll(handle) not in (None, 0)
        wait_until(lambda: not pgrep(marker), "no rank left", 60)
    finally:
        backend.close()


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the ranks are read from /proc")
@pytest.mark.timeout(120)
def test_kill_all_scans_the_process_table_once_and_ends_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kill_all` reads the process table (a scan of /proc: every process's stat file)
    once for all its jobs, not once per job: a stop of 64 jobs on a busy node made 64
    scans before its first SIGTERM. Each job's ranks are still found and ended."""
    marker = f"melissa-scan-once-{os.getpid()}"
    backend = setsid_mpiexec(tmp_path)
    jobs = [Job(f"job-{i}", [*STUBBORN_RANK, marker], ranks=2) for i in range(3)]
    handles = [backend.launch(job) for job in jobs]
    try:
        wait_until(lambda: len(pgrep(marker)) == 9, "3 launchers and their 6 ranks", 60)
        scans = []
        real = mpiexec_module.process_table

        def counted() -> Any:
            scans.append(1)
            return real()

        monkeypatch.setattr(mpiexec_module, "process_table", counted)
        assert backend.kill_all(handles, grace=0.5) == [None, None, None]
        assert len(scans) == 1, scans
        wait_until(lambda: not pgrep(marker), "no rank left", 60)
    finally:
        backend.close()
    assert not pgrep(marker)


@pytest.mark.e2e
def test_process_tree_lists_descendants() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        wait_until(lambda: len(process_tree(os.getpid())) >= 2, "the sleep", 60)
        pids = {pid for pid, _ in process_tree(os.getpid())}
        assert child.pid in pids and len(pids) >= 2
    finally:
        for pid, _ in process_tree(child.pid):
            os.kill(pid, 9)
        child.kill()
        child.wait()
