"""How many MPICH segments (``/dev/shm/mpich_*``) an MPI job that fails leaves behind.

MPICH creates ``/dev/shm/mpich_shm_<hash>_<node>`` in ``MPI_Init`` and unlinks it in
``MPI_Finalize`` only (`melissa_trainer.launcher.backends.mpich_segments`). A compiled
solver (C, built here with the ``mpich`` wheel's ``mpicc``) fails in one of four ways:

* ``segv``: rank 0 raises SIGSEGV right after ``MPI_Init``;
* ``abort``: every rank calls ``MPI_Abort`` right after ``MPI_Init``;
* ``exit1``: every rank calls ``exit(1)`` right after ``MPI_Init`` (no ``MPI_Finalize``);
* ``late``: rank 0 raises SIGSEGV 2 s after ``MPI_Init`` (a crash in the time loop).

Baseline: the job run by ``mpiexec -n RANKS`` alone; the files it leaves are the job's
files. Ours: the same job run by `MpiexecBackend`, polled every 0.2 s (the launcher's
default ``poll_interval``) until it ends; the files left then. Each case ``--reps``
times (default 5); the rows give the totals, target 0 left (ratio: ours / baseline, the
share of the jobs' files left).

/dev/shm is shared by everything on the machine: another MPI job starting or failing
meanwhile would be counted. So, run as root where a new mount namespace is allowed, the
script re-executes itself with a private, empty /dev/shm (``unshare -m`` and a tmpfs
mounted on /dev/shm, seen by this process and its jobs only); otherwise (``--shared``,
not root, or no namespace) it counts the new ``mpich_*`` files, and its last note says
the counts may include others' jobs.

    python benchmarks/mpich_shm_early.py            # about 30 s
    python benchmarks/mpich_shm_early.py --quick    # 1 repetition each
    python benchmarks/mpich_shm_early.py --json
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.launcher.backends import Job, MpiexecBackend  # noqa: E402

SHM = Path("/dev/shm")
MODES = ("segv", "abort", "exit1", "late")
RANK_C = r"""
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argv[1];
    if (!strcmp(mode, "segv") && rank == 0) raise(SIGSEGV);
    if (!strcmp(mode, "abort")) MPI_Abort(MPI_COMM_WORLD, 3);
    if (!strcmp(mode, "exit1")) exit(1);
    if (!strcmp(mode, "late")) {
        sleep(2);
        if (rank == 0) raise(SIGSEGV);
        sleep(30);
    }
    MPI_Finalize();
    return 0;
}
"""


def segments() -> set[str]:
    """The names of MPICH's files in /dev/shm now."""
    return {p.name for p in SHM.glob("mpich_*")}


def clear(names: set[str]) -> None:
    """Remove files `names` (this run's jobs' leftovers), for the next repetition."""
    for name in names:
        (SHM / name).unlink(missing_ok=True)


def run_plain(mpiexec: str, rank: Path, mode: str, ranks: int) -> int:
    """The job under mpiexec alone: how many files it left."""
    before = segments()
    subprocess.run(
        [mpiexec, "-n", str(ranks), str(rank), mode],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    left = segments() - before
    clear(left)
    return len(left)


def run_ours(mpiexec: str, rank: Path, mode: str, ranks: int, here: Path) -> int:
    """The job under `MpiexecBackend`, polled as the launcher does: files left."""
    before = segments()
    backend = MpiexecBackend(mpiexec)
    try:
        job = Job("sim-0", [str(rank), mode], log_path=here / "log", ranks=ranks)
        handle = backend.launch(job)
        deadline = time.monotonic() + 120
        while backend.poll(handle) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{mode}: the job did not end in 120 s")
            time.sleep(0.2)
    finally:
        backend.close()
    left = segments() - before
    clear(left)
    return len(left)


def can_go_private() -> bool:
    """Whether this process may run its jobs with a /dev/shm of their own (root, with
    ``unshare``, in a machine or container that allows a new mount namespace)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount -t tmpfs tmpfs /dev/shm",
    ]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def default_mpiexec() -> str:
    """The mpich wheel's mpiexec, installed beside this Python, else PATH's. Not PATH
    first: a system MPICH ahead of the venv on PATH (Debian's 4.0.2 leaves no file in
    these cases) would measure another MPI than the one this script names."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("mpiexec") or "mpiexec"


def measure(reps: int, ranks_list: list[int], mpiexec: str) -> list[dict[str, Any]]:
    # (the mpicc of the same MPI as mpiexec: its directory's)
    mpicc = shutil.which("mpicc", path=str(Path(mpiexec).parent)) or "mpicc"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        (here / "rank.c").write_text(RANK_C)
        subprocess.run([mpicc, "-o", str(here / "rank"), str(here / "rank.c")], check=True)
        for ranks in ranks_list:
            for mode in MODES:
                plain = sum(run_plain(mpiexec, here / "rank", mode, ranks) for _ in range(reps))
                ours = sum(run_ours(mpiexec, here / "rank", mode, ranks, here) for _ in range(reps))
                rows.append(
                    {
                        "case": f"{mode}, {ranks} rank(s), {reps} jobs: files left",
                        "ours": ours,
                        "baseline": plain,
                        "unit": "files",
                        "ratio": ours / plain if plain else None,
                        "target": 0,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flags(parser, quick="1 repetition of each case")
    parser.add_argument("--reps", type=int, default=5, help="jobs per case (default 5)")
    parser.add_argument(
        "--shared",
        action="store_true",
        help="count in the machine's /dev/shm (others' MPI jobs may be counted)",
    )
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2], help="default 1 2")
    parser.add_argument(
        "--mpiexec",
        default=None,
        help="the MPICH mpiexec to measure, its mpicc beside it (default: the mpich "
        "wheel's, beside this Python, else PATH's)",
    )
    parser.add_argument("--private-shm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    private = args.private_shm
    if not private and not args.shared and can_go_private():
        # re-run with a private, empty /dev/shm: only this run's files are counted
        mount = 'mount -t tmpfs -o size=256m tmpfs /dev/shm && exec "$@"'
        argv = [sys.executable, *sys.argv, "--private-shm"]
        private_run = ["unshare", "-m", "--propagation", "private", "sh", "-c", mount]
        os.execvp("unshare", [*private_run, "sh", *argv])
    rows = measure(1 if args.quick else args.reps, args.ranks, args.mpiexec or default_mpiexec())
    notes = [
        "baseline: mpiexec alone; ours: MpiexecBackend, polled every 0.2 s",
        "a private /dev/shm: only this run's files counted"
        if private
        else "the machine's /dev/shm: others' MPI jobs may be counted",
    ]
    title = "MPICH segments left by failing MPI jobs"
    finish(rows, title, as_json=args.json, notes=notes, private_shm=private)


if __name__ == "__main__":
    main()
