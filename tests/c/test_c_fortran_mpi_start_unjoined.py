"""The Fortran `mt_start_mpi` of a rank whose peer never calls it fails with the fix in
its words, after the rendezvous timeout, where it waited for ever; ranks that all call
it pass it, a late one included.

As the C header's (tests/launcher/test_mpi_start_unjoined_c.py): the first reduction
of the start is an ``MPI_Iallreduce`` polled until the rendezvous timeout (at least
10 s; clients/c/src/mpi_join.c). Before (main's module): rank 0 waited in
``MPI_Allreduce`` for rank 1, which started with the plain ``mt_start`` and exited,
and the run ended at the test's bound ("timed out"). The oracle: each rank's printed
status and words.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from compiled import MPI_SANITIZER_ENV, CClient, c_client  # noqa: F401 (fixture)
from helpers import NO_MPI, find_mpiexec
from tooling import missing_tool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # every test here starts mpiexec

MT_EMPI = 11

FORTRAN = """
program start_unjoined
  use, intrinsic :: iso_c_binding, only: c_int64_t, c_double
  use mpi_f08
  use melissa_trainer
  use melissa_trainer_mpi
  implicit none
  type(mt_client_t) :: client
  integer :: rank, ierr
  character(len=8) :: how  ! rank 1's start: plain, or late (mt_start_mpi, 2 s after)
  call get_command_argument(1, how)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call mt_create(client)
  call mt_set_simulation_id(client, 3_c_int64_t)
  call mt_set_endpoints(client, 'tcp://127.0.0.1:9')  ! (connected later: nothing sent)
  call mt_set_rendezvous(client, '.', 0.0_c_double)  ! the shortest bound: 10 s
  call mt_declare_field(client, 'u', MT_FLOAT64, [4])
  if (rank == 1 .and. how == 'plain') then
    call mt_start(client, ierr)
  else
    if (rank == 1) call sleep_s(2.0d0)
    call mt_declare_part_count(client, 'u', 2_c_int64_t)
    call mt_start_mpi(client, MPI_COMM_WORLD, ierr)
  end if
  print '(i0, 1x, i0, 1x, a)', rank, ierr, mt_error_message(client)
  call mt_abort(client)
  call MPI_Finalize()
contains
  subroutine sleep_s(seconds)
    double precision, intent(in) :: seconds
    double precision :: start
    start = MPI_Wtime()
    do while (MPI_Wtime() - start < seconds)
    end do
  end subroutine
end program
"""

WORDS = (
    " s for the other 1 rank(s) of the communicator to call mt_start_mpi too, and not all "
    "of them did (a rank that starts with the plain mt_start, or not at all, never joins). "
    "Every rank of the communicator must call mt_start_mpi on it; or, where one rank "
    "streams the whole fields alone, call the plain mt_start on that rank only and "
    "mt_start_mpi on none. The bound is the rendezvous timeout (mt_set_rendezvous; "
    "default 60 s, at least 10 s): raise it if a rank of yours starts that much later"
)


def _run(client: CClient, tmp_path: Path, how: str) -> list[str]:
    """Rank 0 on mt_start_mpi, rank 1 as `how` says: each rank's printed line, sorted."""
    mpiexec = find_mpiexec()
    modules, lib = client.prefix / "include" / "fortran", client.lib_dir
    if mpiexec is None:
        missing_tool(NO_MPI)
    if shutil.which("mpif90") is None or not (modules / "melissa_trainer_mpi.mod").exists():
        missing_tool("melissa_trainer_mpi was not built: needs mpif90 with mpi_f08")
    (tmp_path / "prog.f90").write_text(FORTRAN)
    sanitize = [f"-fsanitize={client.sanitize}", "-g"] if client.sanitize else []
    subprocess.run(
        ["mpif90", "-std=f2018", "-Wall", "-Werror", *sanitize, f"-I{modules}",
         str(tmp_path / "prog.f90"),
         "-o", str(tmp_path / "prog"), f"-L{lib}", "-lmelissa_trainer_fortran_mpi",
         "-lmelissa_trainer_fortran", "-lmelissa_trainer_client", f"-Wl,-rpath,{lib}"],
        check=True, timeout=60,
    )  # fmt: skip
    base = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env = {**base, **MPI_SANITIZER_ENV} if client.sanitize else base
    proc = subprocess.run(
        [mpiexec, "-n", "2", str(tmp_path / "prog"), how],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sorted(line for line in proc.stdout.splitlines() if line[:1] in "01")


def test_a_fortran_rank_whose_peer_started_plain_fails_with_the_fix(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    rank_0, rank_1 = _run(c_client, tmp_path, "plain")
    assert rank_0.startswith(f"0 {MT_EMPI} mt_start_mpi: this rank (0 of 2) waited "), rank_0
    assert rank_0.endswith(WORDS), rank_0
    assert rank_1 == "1 0 ", rank_1  # its plain start: started


def test_fortran_ranks_that_all_call_mt_start_mpi_start_a_late_one_included(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert _run(c_client, tmp_path, "late") == ["0 0 ", "1 0 "]
