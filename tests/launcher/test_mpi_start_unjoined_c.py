"""A C solver whose ranks disagree on their communicator no longer hangs its job: rank 0
of ``mpiexec -n 2`` starts with ``mt_client_start_mpi``, rank 1 with the plain
``mt_client_start``; and the solvers that start right still run to their end.

The MPI start runs its collectives before the HELLO. Before (hcmpi, 2026-12-06, main's
code): rank 0 waited in ``MPI_Allreduce`` for a rank that never joined; rank 1 said
HELLO as client rank 0 of 1 and streamed the simulation alone; the job ran on until the
launcher killed it after ``startup_timeout`` (600 s) and the next simulation queued
behind it (here: "stream did not end" or "the study to complete" at the test's bound).
Now the first collective is an ``MPI_Iallreduce`` polled until the rendezvous timeout
(clients/c/src/mpi_join.c; at least 10 s): rank 0 returns ``MT_EMPI`` with words naming
the two right ways to start, and the job ends.

Not a stop of the study: the receiver cannot tell this simulation from a legitimate one
whose one rank streams alone (the controls below), so rank 1's complete stream stands;
a solver that exits non-zero on the error (as it should) gets its simulation recorded
failed, and the study's error quotes the words.

The oracles: each job's log (rank 0's status line, its words), the samples the receiver
assembled, the study's end.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from c_driver import mpi_script_exe  # noqa: F401 (fixture)
from compiled import CClient, c_client  # noqa: F401 (fixture)
from helpers import find_mpiexec
from launcher_runs import failure, keys, launcher, receive, stream_study

from melissa_trainer.launcher.backends import MpiexecBackend
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

N = 2  # simulations, one job at a time: a hung job holds the next one back
STEPS = 3


def _whole(first: int, start: str = "start") -> str:
    """A rank that declares the field of 4 and streams it whole (`start`: its start);
    its lines from `first` on (comments fill the lines before), so that the log tells
    the ranks apart."""
    sends = "".join(f"send {t} u 1 4 {t}\n" for t in range(STEPS))
    return "#\n" * (first - 1) + f"field u 1 1 4\n{start}\n" + sends + "close\n"


def _half(rendezvous: Path, first: int, before: str = "") -> str:
    """A rank that streams its half (2 of 4) on the MPI start, its lines from `first`
    on; the rendezvous timeout 0 makes its bound on the wait for its peers the
    shortest (10 s); `before`: lines before its start."""
    sends = "".join(f"send {t} u 1 2 {t}\n" for t in range(STEPS))
    head = f"rendezvous {rendezvous} 0\nfield u 1 1 4\npartcount u 2\n{before}start_mpi\n"
    return "#\n" * (first - 1) + head + sends + "close\n"


def _run(exe: Path, tmp_path: Path, scripts: list[str]) -> tuple[Counter, list[str]]:
    """The study of `N` simulations of the 2-rank `exe` (each rank its script) under
    mpiexec: the (simulation, step) of each sample it streamed, and each job's log."""
    for rank, script in enumerate(scripts):
        (tmp_path / f"mpi_{rank}.txt").write_text(script)
    receiver, buffer = receive(tmp_path, N)
    launch = launcher(
        [str(exe), str(tmp_path / "mpi_RANK.txt")],
        N,
        job_limit=1,
        backend=MpiexecBackend(find_mpiexec()),
        ranks_per_simulation=2,
        log_dir=tmp_path / "logs",
    )
    samples = stream_study(launch, tmp_path, receiver, buffer, timeout=90)
    logs = [(tmp_path / "logs" / f"sim-{sid}.log").read_text() for sid in range(N)]
    return keys(samples), logs


def test_a_rank_on_the_mpi_start_whose_peer_started_plain_fails_with_the_fix(
    mpi_script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / "rendezvous"
    # rank 0: lines 1-5 (its start_mpi: line 4); rank 1: its lines from 11 on
    streamed, logs = _run(mpi_script_exe, tmp_path, [_half(rendezvous, 1), _whole(11)])
    # rank 1 streamed each simulation whole (the receiver's samples of both: the first
    # job ended, so the second ran)
    assert streamed == Counter({(s, t): 1 for s in range(N) for t in range(STEPS)})
    for log in logs:
        start = next(line for line in log.splitlines() if line.startswith("4 "))
        assert start.startswith("4 11 mt_client_start_mpi: this rank (0 of 2) waited "), (
            log
        )  # MT_EMPI, after its bound
        assert start.endswith(
            " s for the other 1 rank(s) of the communicator to call mt_client_start_mpi "
            "too, and not all of them did (a rank that starts with the plain "
            "mt_client_start, or not at all, never joins). Every rank of the communicator "
            "must call mt_client_start_mpi on it; or, where one rank streams the whole "
            "fields alone, call the plain mt_client_start on that rank only and "
            "mt_client_start_mpi on none. The bound is the rendezvous timeout "
            "(mt_set_rendezvous; default 60 s, at least 10 s): raise it if a rank of "
            "yours starts that much later"
        ), log
        assert "\n12 0 " in log, log  # rank 1's start


def test_a_solver_that_exits_on_the_error_fails_its_simulation_with_the_words(
    mpi_script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A solver exits non-zero on MT_EMPI (as docs/how-to/compiled-solver.md says):
    the launcher records the simulation failed, though its lone rank's stream had its
    BYE, and quotes rank 0's words in the study's error (``on_failure="raise"``, no
    restart: the error at the first failure)."""
    rendezvous = tmp_path / "rendezvous"
    scripts = [_half(rendezvous, 1).replace("start_mpi\n", "start_mpi\nexit 3\n"), _whole(11)]
    for rank, script in enumerate(scripts):
        (tmp_path / f"mpi_{rank}.txt").write_text(script)
    receiver, buffer = receive(tmp_path, N)
    launch = launcher(
        [str(mpi_script_exe), str(tmp_path / "mpi_RANK.txt")],
        N,
        job_limit=1,
        backend=MpiexecBackend(find_mpiexec()),
        ranks_per_simulation=2,
        log_dir=tmp_path / "logs",
        tuning={"max_restarts": 0, "on_failure": "raise"},
    )
    try:
        launch.start(rendezvous, heartbeat=receiver.activity)
        message = str(failure(launch, timeout=90))
    finally:
        launch.stop()
        receiver.stop()
    assert message.startswith("simulation 0 failed once (exit codes [3]"), message
    assert "| 4 11 mt_client_start_mpi: this rank (0 of 2) waited " in message, message
    assert "Every rank of the communicator must call mt_client_start_mpi on it" in message
    record = records_of(launch.state_dict())[0]
    assert (record["status"], record["exit_codes"]) == ("failed", [3]), record


#: the legitimate ways: each rank's script (its lines: rank 0 from 1, rank 1 from 21)
CONTROLS = {
    # both on the MPI start, rank 1 two seconds late (within the bound: it waits)
    "every rank on the MPI start": lambda r: [_half(r, 1), _half(r, 21, "sleep 2\n")],
    # rank 0 gathers the field and streams alone; rank 1 starts no client
    "rank 0 streams alone": lambda r: [_whole(1), ""],
    # the last rank is an I/O rank that streams alone; rank 0 starts no client
    "the last rank streams alone": lambda r: ["", _whole(21)],
}


@pytest.mark.parametrize("pattern", sorted(CONTROLS))
def test_a_solver_that_starts_right_runs_to_its_end(
    mpi_script_exe: Path,  # noqa: F811
    tmp_path: Path,
    pattern: str,
) -> None:
    scripts = CONTROLS[pattern](tmp_path / "rendezvous")
    streamed, logs = _run(mpi_script_exe, tmp_path, scripts)
    assert streamed == Counter({(s, t): 1 for s in range(N) for t in range(STEPS)})
    for log in logs:
        statuses = [line.split(" ", 2)[1] for line in log.splitlines() if line[:1].isdigit()]
        assert statuses and set(statuses) == {"0"}, log  # every call of every rank: MT_OK
        assert "waited" not in log, log
