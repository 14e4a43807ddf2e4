"""A real single-node Slurm cluster for tests: munged, slurmctld and slurmd under a
temporary directory, on free (non-default) ports held for them (`held_ports.held_port`).

Usage (pytest), in the xdist group "slurm" (pyproject's ``--dist loadgroup`` runs the
group on one worker, so that two clusters never run at once)::

    from slurm_cluster import slurm_cluster  # noqa: F401  (the module-scoped fixture)

    @pytest.mark.xdist_group("slurm")
    def test_x(slurm_cluster: SlurmCluster) -> None: ...

or, for one test's own cluster, ``with one_node_cluster() as cluster: ...``.

The fixture skips, with the reason, only where the cluster cannot be started at all: not
root (the daemons run as root and munged as the ``munge`` user) or the Debian packages
are missing (``apt-get install slurmctld slurmd slurm-client munge``). Any other failure
to start is an error that shows the daemons' logs.

While it is up, ``SLURM_CONF`` points at its configuration in this process's
environment (so that every Slurm command and job started by the tests uses it). At the
end every job is cancelled, the daemons are stopped, any process still carrying this
cluster's ``SLURM_CONF`` (job steps, their children) is killed, and the directory is
removed. The daemons also get PR_SET_PDEATHSIG=SIGKILL, so a killed pytest does not
leave them running.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from held_ports import held_port
from mpich_shm import mpich_segments, warn_unheld_steps
from tooling import missing_tool

SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scancel", "srun", "salloc", "scontrol")
PACKAGES = "slurmctld slurmd slurm-client munge"
START_TIMEOUT = 60.0
PARTITION = "debug"
#: a cluster's first job id is drawn from this range (MaxJobId is 67043328): see
#: `SlurmCluster.first_job_id`
FIRST_JOB_IDS = (1_000, 60_000_000)
#: `SlurmCluster.stop` removes MPICH's segments of the cluster's first MAX_JOBS jobs (a
#: test module submits ~100)
MAX_JOBS = 2_000


def _which(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    return shutil.which(name, path=path)


def skip_reason() -> str | None:
    """Why a cluster cannot be started here, or None if it can."""
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (slurmd runs jobs as root, munged as munge)"
    return tools_missing()


def tools_missing() -> str | None:
    """Which of Slurm's and munge's programs (or the munge user) are missing, or None:
    what CI installs (`tooling.missing_tool`: a failure there, not a skip)."""
    missing = [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]
    if missing:
        return (
            f"Slurm/munge not installed (missing {', '.join(missing)}): apt-get install {PACKAGES}"
        )
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return f"no 'munge' user (the munge package creates it): apt-get install {PACKAGES}"
    return None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class SlurmCluster:
    """A running single-node cluster (see the module docstring).

    Attributes:
        root: its temporary directory (mode 0755: the munge user must reach the socket).
        conf: its slurm.conf.
        node: the node name (the short host name); cpus: the node's CPUs.
        partition: the default partition's name.
        first_job_id: drawn at random. Starting at job 1 (Slurm's default), every
            session's N-th job step had the PMI key-value-space name "N.0"; MPICH names
            its node's segment ``/dev/shm/mpich_shm_<hash of it>_0``, attaches to an
            existing one and unlinks it at MPI_Finalize only: one killed MPI job left a
            segment that made the same job of every later session fail in MPI_Init
            (docs/how-to/slurm.md, "A stale MPICH segment").
        setup_seconds: wall time from the first daemon's start to the node idle.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="melissa-slurm-"))
        self.root.chmod(0o755)
        self.conf = self.root / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]
        self.partition = PARTITION
        self.cpus = 1
        self.first_job_id = random.randrange(*FIRST_JOB_IDS)
        self.setup_seconds = float("nan")
        self._daemons: dict[str, subprocess.Popen[bytes]] = {}

    # -- start -------------------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        munge_socket = self._start_munge()
        node_line = self._node_line()
        self._write_conf(munge_socket, node_line)
        os.environ["SLURM_CONF"] = str(self.conf)
        self._spawn("slurmctld", [_path("slurmctld"), "-D", "-c", "-f", str(self.conf)])
        self._spawn("slurmd", [_path("slurmd"), "-D", "-f", str(self.conf)])
        deadline = time.monotonic() + START_TIMEOUT
        state = ""
        while state != "idle":
            self._check_daemons()
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"node {self.node} not idle after {START_TIMEOUT} s "
                    f"(state {state!r})\n{self.logs()}"
                )
            time.sleep(0.1)
            state = self._node_state()
        self.setup_seconds = time.monotonic() - started

    def _start_munge(self) -> Path:
        directory = self.root / "munge"
        directory.mkdir(mode=0o755)
        key = directory / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munge = pwd.getpwnam("munge")
        for path in (directory, key):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        sock = directory / "munge.socket"
        self._spawn(
            "munged",
            [
                _path("munged"),
                "--foreground",
                f"--key-file={key}",
                f"--socket={sock}",
                f"--pid-file={directory / 'munged.pid'}",
                f"--log-file={directory / 'munged.log'}",
                f"--seed-file={directory / 'munged.seed'}",
            ],
            user=munge.pw_uid,
            group=munge.pw_gid,
        )
        deadline = time.monotonic() + 10
        while not sock.exists():
            self._check_daemons()
            if time.monotonic() > deadline:
                raise RuntimeError(f"munged did not create {sock}\n{self.logs()}")
            time.sleep(0.02)
        return sock

    def _node_line(self) -> str:
        """This machine's ``NodeName=... CPUs=... RealMemory=...`` (``slurmd -C``)."""
        out = subprocess.run(
            [_path("slurmd"), "-C"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
        fields = dict(token.split("=", 1) for token in line.split())
        self.cpus = int(fields["CPUs"])
        fields["NodeName"] = self.node
        return " ".join(f"{key}={value}" for key, value in fields.items()) + " State=UNKNOWN"

    def _write_conf(self, munge_socket: Path, node_line: str) -> None:
        for name in ("state", "spool", "log"):
            (self.root / name).mkdir()
        (self.root / "plugstack.conf").write_text("")  # not the host's /etc/slurm one
        # held until the test ends, not bound and closed (another test's bind to port 0
        # could take one before the daemon binds it): slurmctld and slurmd set
        # SO_REUSEADDR before their bind to 0.0.0.0 (strace, Slurm 22.05), as held_port needs
        ctld_port, slurmd_port = held_port(), held_port()
        r = self.root
        self.conf.write_text(
            f"""# single-node test cluster written by tests/slurm_cluster.py
ClusterName=melissatest
SlurmctldHost={self.node}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued batch job waits until its credential expires (120 s by
# default) before it starts again; 5 s, the least Slurm accepts ("AuthInfo=cred_expire=3
# invalid" below it), keeps the requeue test short: a step's credential is checked
# by slurmd when srun launches it, well within 5 s even on a loaded machine
AuthInfo=socket={munge_socket},cred_expire=5
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
PlugStackConfig={r / "plugstack.conf"}
StateSaveLocation={r / "state"}
SlurmdSpoolDir={r / "spool"}
SlurmctldPidFile={r / "slurmctld.pid"}
SlurmdPidFile={r / "slurmd.pid"}
SlurmctldLogFile={r / "log" / "slurmctld.log"}
SlurmdLogFile={r / "log" / "slurmd.log"}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SchedulerParameters=sched_interval=1
FirstJobId={self.first_job_id}
KillWait=2
InactiveLimit=0
{node_line}
PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        )

    def _spawn(self, name: str, argv: list[str], **kwargs: int) -> None:
        log = open(self.root / f"{name}.out", "wb")  # noqa: SIM115 - the daemon's stdout
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        try:
            self._daemons[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C of pytest is for pytest, not the daemons
                preexec_fn=_die_with_parent,
                extra_groups=[] if "user" in kwargs else None,
                **kwargs,  # type: ignore[arg-type]
            )
        finally:
            log.close()

    def run(self, *argv: str, env: dict[str, str] | None = None) -> str:
        """Run a Slurm command (``sbatch``, ``squeue``, ...) on this cluster, with `env`
        (default: this process's; SLURM_CONF is this cluster's); its output. Asserts
        exit 0 (the message is the command's stderr)."""
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            env={**(os.environ if env is None else env), "SLURM_CONF": str(self.conf)},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def _node_state(self) -> str:
        result = subprocess.run(
            [_path("sinfo"), "-h", "-N", "-n", self.node, "-p", self.partition, "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "SLURM_CONF": str(self.conf)},
        )
        return result.stdout.strip()

    def _check_daemons(self) -> None:
        for name, process in self._daemons.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}\n{self.logs()}")

    def logs(self, lines: int = 15) -> str:
        """The last lines of every daemon log, for error messages."""
        out = []
        for path in sorted([*self.root.glob("*.out"), *self.root.glob("log/*.log")]):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(tail))
        munge_log = self.root / "munge" / "munged.log"
        if munge_log.exists():
            out.append("--- munged.log\n" + "\n".join(munge_log.read_text().splitlines()[-lines:]))
        return "\n".join(out)

    @contextlib.contextmanager
    def controller_paused(self) -> Iterator[None]:
        """slurmctld stopped (SIGSTOP) inside the block, resumed (SIGCONT) on leaving,
        whatever happened: a controller that froze (a hung host, a long GC of its state,
        a fail-over in progress). Its port still accepts connections (the kernel queues
        them): a command's request is sent, its reply never comes ("Socket timed out on
        send/recv operation" after MessageTimeout), and the controller processes the
        queued requests when it resumes, those of commands that gave up included."""
        with self.paused("slurmctld"):
            yield

    @contextlib.contextmanager
    def paused(self, daemon: str) -> Iterator[None]:
        """`daemon` ("slurmctld", "slurmd") stopped (SIGSTOP) inside the block, resumed
        on leaving, whatever happened. A frozen slurmd: the controller allocates a job,
        its launch times out (MessageTimeout), and Slurm requeues it held."""
        process = self._daemons[daemon]
        process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            process.send_signal(signal.SIGCONT)

    # -- stop ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Cancel all jobs, stop the daemons, kill leftovers, remove MPICH's
        shared-memory segments of the cluster's steps (`mpich_segments`: those of a
        killed MPI job stay, 2 MB each), remove the directory."""
        try:
            for process in self._daemons.values():  # (a paused one ignores SIGTERM)
                if process.poll() is None:
                    process.send_signal(signal.SIGCONT)
            if (
                self._daemons.get("slurmctld") is not None
                and self._daemons["slurmctld"].poll() is None
            ):
                env = {**os.environ, "SLURM_CONF": str(self.conf)}
                subprocess.run(
                    [_path("scancel"), "--full", "--signal=KILL", f"--partition={self.partition}"],
                    capture_output=True,
                    timeout=30,
                    env=env,
                )
                subprocess.run(
                    [_path("scancel"), f"--partition={self.partition}"],
                    capture_output=True,
                    timeout=30,
                    env=env,
                )
            for name in ("slurmd", "slurmctld", "munged"):
                process = self._daemons.get(name)
                if process is None:
                    continue
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(10)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(10)
            for pid in self.leftover_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.remove_mpich_segments()
        finally:
            if os.environ.get("SLURM_CONF") == str(self.conf):
                del os.environ["SLURM_CONF"]
            shutil.rmtree(self.root, ignore_errors=True)

    def remove_mpich_segments(self) -> None:
        """Remove MPICH's shared-memory segments named after this cluster's job steps."""
        for path in mpich_segments(range(self.first_job_id, self.first_job_id + MAX_JOBS)):
            path.unlink(missing_ok=True)

    def leftover_pids(self) -> list[int]:
        """Processes (other than this one) whose environment holds this cluster's
        SLURM_CONF: slurmstepd and job processes, and the daemons if still running."""
        marker = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                pids.append(int(entry.name))
        return pids


def _path(name: str) -> str:
    path = _which(name)
    assert path is not None, name
    return path


@contextlib.contextmanager
def one_node_cluster() -> Iterator[SlurmCluster]:
    """A cluster started for the caller, stopped (and removed) on leaving, whatever
    happened; the test is skipped, with the reason, where none can start (see
    `skip_reason`). The tests that use one are in the xdist group "slurm" (one worker:
    never two clusters at once)."""
    reason = skip_reason()
    if reason is not None and reason == tools_missing():
        missing_tool(reason)  # (CI installs them: a failure under CI=true)
    if reason is not None:
        pytest.skip(reason)
    cluster = SlurmCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def slurm_cluster(request: pytest.FixtureRequest) -> Iterator[SlurmCluster]:
    """A running cluster for the tests of one module (started once, torn down after);
    the MPICH files its steps left that nobody holds are named first (`warn_unheld_steps`)."""
    with one_node_cluster() as cluster:
        print(f"\nSlurm test cluster up in {cluster.setup_seconds:.1f} s ({cluster.root})")
        yield cluster
        first = cluster.first_job_id
        warn_unheld_steps(range(first, first + MAX_JOBS), request.node.nodeid)
