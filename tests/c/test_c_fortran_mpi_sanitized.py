"""A Fortran MPI program (mpif90: the system's MPI, the mpich wheel has no Fortran) under
AddressSanitizer and LeakSanitizer, as ``MT_TEST_SANITIZE=1`` runs
tests/c/test_c_mpi_declarations_differ.py's.

Before, every such run failed on 1016 bytes in 9 blocks per rank, "leaked" from an
"<unknown module>": hwloc's pci plugin, which MPI_Init loads (its libpciaccess keeps
what it allocates in its own static data) and MPI_Finalize unloads. The same under the
system's own mpiexec, so not the wheel's mpiexec against the system's libmpich: the
plugin. `compiled.MPI_SANITIZER_ENV` leaves the plugin out (``HWLOC_COMPONENTS=-pci``)
and suppresses nothing; the second test checks that a leak of our own C client (a
client created and dropped) is still caught under it, named by our frame.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from compiled import MPI_SANITIZER_ENV, CClient, sanitized_c_client  # noqa: F401 (fixture)
from helpers import NO_MPI, find_mpiexec
from tooling import missing_tool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]  # a sanitized build, mpiexec

#: each rank starts a client on MPI_COMM_WORLD and ends it; with "leak", it also creates
#: one more client and drops its handle (our library's allocation, never freed)
PROGRAM = """
program sanitized
  use, intrinsic :: iso_c_binding, only: c_int64_t, c_null_ptr
  use mpi_f08
  use melissa_trainer
  use melissa_trainer_mpi
  implicit none
  type(mt_client_t) :: client, dropped
  character(len=8) :: mode
  integer :: rank, ierr
  call get_command_argument(1, mode)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call mt_create(client)
  call mt_set_endpoints(client, 'tcp://127.0.0.1:9')
  call mt_declare_field(client, 'u', MT_FLOAT64, [4, 3])
  call mt_declare_part_count(client, 'u', 6_c_int64_t)
  call mt_start_mpi(client, MPI_COMM_WORLD, ierr)
  print '(i0, 1x, i0)', rank, ierr
  call mt_abort(client)
  if (trim(mode) == 'leak') then
    call mt_create(dropped)
    dropped%handle = c_null_ptr
  end if
  call MPI_Finalize()
end program
"""


def _run(client: CClient, tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """PROGRAM built with mpif90 against the sanitized `client`, run on 2 ranks with
    `MPI_SANITIZER_ENV`."""
    mpiexec = find_mpiexec()
    modules, lib = client.prefix / "include" / "fortran", client.lib_dir
    if mpiexec is None:
        missing_tool(NO_MPI)
    if shutil.which("mpif90") is None or not (modules / "melissa_trainer_mpi.mod").exists():
        missing_tool("melissa_trainer_mpi was not built: needs mpif90 with mpi_f08")
    (tmp_path / "prog.f90").write_text(PROGRAM)
    subprocess.run(
        ["mpif90", "-std=f2018", "-Wall", "-Werror", f"-fsanitize={client.sanitize}", "-g",
         f"-I{modules}", str(tmp_path / "prog.f90"), "-o", str(tmp_path / "prog"), f"-L{lib}",
         "-lmelissa_trainer_fortran_mpi", "-lmelissa_trainer_fortran",
         "-lmelissa_trainer_client", f"-Wl,-rpath,{lib}"],
        check=True, timeout=120,
    )  # fmt: skip
    return subprocess.run(
        [mpiexec, "-n", "2", str(tmp_path / "prog"), mode],
        capture_output=True, text=True, timeout=100,
        env={**os.environ, **MPI_SANITIZER_ENV, "MELISSA_TRAINER_SIMULATION_ID": "0"},
    )  # fmt: skip


def test_a_fortran_mpi_program_that_frees_everything_runs_clean_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    proc = _run(sanitized_c_client, tmp_path, "clean")
    said = proc.stdout + proc.stderr
    assert "LeakSanitizer" not in said, said[-4000:]
    assert proc.returncode == 0, said[-4000:]
    assert sorted(proc.stdout.split("\n")[:2]) == ["0 0", "1 0"], said[-4000:]


def test_a_client_dropped_by_a_fortran_mpi_program_is_still_caught_as_a_leak(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    proc = _run(sanitized_c_client, tmp_path, "leak")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said[-4000:]
    assert said.count("ERROR: LeakSanitizer: detected memory leaks") == 2, said[-4000:]
    # (named by our own frame: the C client's constructor, under the Fortran binding's)
    assert "in mt_client_create " in said and "in __melissa_trainer" in said, said[-4000:]
