"""The C client's MPI ranks that declare different fields are refused at start, on every
rank, as the Python client's are at their first send (tests/client/
test_mpi_declarations_differ.py): `mt_client_start_mpi` compares a hash of each rank's
declaration (clients/c/src/declaration.c) in the reduction it already does.

Before, it checked the field count and the parts' sizes only: rank 1 of 2 declaring
``u`` float64 where rank 0 declared float32 (parts of the right sizes) started, both
ranks streamed, and the receiver kept whichever HELLO came first and dropped the other
rank's data. The Fortran `mt_start_mpi` does the same check. The oracles: each rank's
own status and words (the Python client's, but for the fix they name), and a PULL
socket that sees nothing of the refused ranks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from c_driver import capture, mpi_run, mpi_script_exe  # noqa: F401 (fixtures)
from compiled import MPI_SANITIZER_ENV, CClient, c_client  # noqa: F401 (fixture)
from helpers import NO_MPI, find_mpiexec
from tooling import missing_tool

from melissa_trainer import wire as P

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]  # every test here starts mpiexec

MT_EMPI = 11
RANK_0 = "'u' float32 (4, 2), 'p' float64 ()"
#: what rank 1 declares differently -> its "field" lines (name dtype ndim shape), its words
OTHER = {
    "none": (["u 1 2 4 2", "p 2 0"], RANK_0),
    "dtype": (["u 2 2 4 2", "p 2 0"], "'u' float64 (4, 2), 'p' float64 ()"),
    "shape": (["u 1 2 2 4", "p 2 0"], "'u' float32 (2, 4), 'p' float64 ()"),
    "name": (["v 1 2 4 2", "p 2 0"], "'v' float32 (4, 2), 'p' float64 ()"),
    "ndim": (["u 1 1 8", "p 2 0"], "'u' float32 (8,), 'p' float64 ()"),
    # one field more: the count is compared with the hash, before the scans (whose
    # lengths are each rank's count); the same words as any other difference
    "extra": (
        ["u 1 2 4 2", "p 2 0", "w 1 1 3"],
        "'u' float32 (4, 2), 'p' float64 (), 'w' float32 (3,)",
    ),
}


def _scripts(other: str) -> list[tuple[str, int]]:
    """Each rank's script and the line of its start: it declares its fields, starts,
    sends its half of its first field and (rank 0) the scalar, and closes (a third field
    has no part: the start refuses the declarations before it looks at parts)."""
    scripts = []
    for rank, fields in enumerate([OTHER["none"][0], OTHER[other][0]]):
        (first, dtype), p = fields[0].split()[:2], 1 - rank
        lines = [f"field {f}" for f in fields]
        lines += [f"partcount {first} 4", f"partcount p {p}", "start_mpi"]
        lines += [f"send 0 {first} {dtype} 4 {rank}", f"send 0 p 2 {p} 9", "close"]
        scripts.append(("\n".join(lines) + "\n", len(fields) + 3))
    return scripts


def _words(rank: int, declares: str) -> str:
    return (
        "the ranks of the communicator declare different fields: this rank "
        f"({rank} of 2) declares {declares}. Declare the same fields (mt_declare_field: "
        "names, order, global shapes, dtypes) on every rank: each rank sends its part of "
        "the same global fields (each rank's error names its own)"
    )


@pytest.mark.parametrize("other", ["dtype", "shape", "name", "ndim", "extra"])
def test_ranks_declaring_other_fields_are_refused_at_start_on_every_rank(
    mpi_script_exe: Path,  # noqa: F811
    capture: Any,  # noqa: F811
    tmp_path: Path,
    other: str,
) -> None:
    cap = capture(1)
    env = {"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_ENDPOINTS": cap.endpoints[0]}
    scripts = _scripts(other)
    results = mpi_run(mpi_script_exe, [script for script, _ in scripts], tmp_path, env)
    (_, start_0), (_, start_1) = scripts
    assert results[0][start_0] == (MT_EMPI, _words(0, RANK_0)), results[0]
    assert results[1][start_1] == (MT_EMPI, _words(1, OTHER[other][1])), results[1]
    for result, (_, start) in zip(results, scripts, strict=True):  # (nothing sent: not started)
        assert all(result[start + k][0] != 0 for k in (1, 2)), result
    # the ranks have exited: whatever they had sent is here (the capture kept linger 0)
    assert not cap.socks[0].poll(0), cap.socks[0].recv_multipart()


def test_ranks_declaring_the_same_fields_start_and_stream(
    mpi_script_exe: Path,  # noqa: F811
    capture: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    cap = capture(1)
    env = {"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_ENDPOINTS": cap.endpoints[0]}
    results = mpi_run(mpi_script_exe, [script for script, _ in _scripts("none")], tmp_path, env)
    for result in results:
        assert all(status == 0 for status, _ in result.values()), result
    kinds = [frames[0][P.KIND_AT] for frames in cap.until_bye(byes=2)[0]]
    assert kinds.count(P.DATA) + kinds.count(P.BATCH) >= 2, kinds


FORTRAN = """
program declarations_differ
  use, intrinsic :: iso_c_binding, only: c_int64_t
  use mpi_f08
  use melissa_trainer
  use melissa_trainer_mpi
  implicit none
  type(mt_client_t) :: client
  integer :: rank, ierr
  character(len=8) :: other  ! what rank 1 declares differently: dtype, extra
  call get_command_argument(1, other)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call mt_create(client)
  call mt_set_endpoints(client, 'tcp://127.0.0.1:9')
  if (rank == 0 .or. other == 'extra') then
    call mt_declare_field(client, 'u', MT_FLOAT64, [4, 3])
  else
    call mt_declare_field(client, 'u', MT_FLOAT32, [4, 3])  ! (parts of the right size)
  end if
  if (rank == 1 .and. other == 'extra') call mt_declare_field(client, 'w', MT_FLOAT32, [3])
  call mt_declare_part_count(client, 'u', 6_c_int64_t)
  call mt_start_mpi(client, MPI_COMM_WORLD, ierr)
  print '(i0, 1x, i0, 1x, a)', rank, ierr, mt_error_message(client)
  call mt_abort(client)
  call MPI_Finalize()
end program
"""


#: what rank 1 declares differently -> what each rank's words say it declares (Fortran's
#: [4, 3] in C order)
FORTRAN_OTHER = {
    "dtype": ["'u' float64 (3, 4)", "'u' float32 (3, 4)"],
    "extra": ["'u' float64 (3, 4)", "'u' float64 (3, 4), 'w' float32 (3,)"],
}


@pytest.mark.parametrize("other", sorted(FORTRAN_OTHER))
def test_fortran_ranks_declaring_other_fields_are_refused_at_start_on_every_rank(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
    other: str,
) -> None:
    mpiexec = find_mpiexec()
    modules, lib = c_client.prefix / "include" / "fortran", c_client.lib_dir
    if mpiexec is None:
        missing_tool(NO_MPI)
    if shutil.which("mpif90") is None or not (modules / "melissa_trainer_mpi.mod").exists():
        missing_tool("melissa_trainer_mpi was not built: needs mpif90 with mpi_f08")
    (tmp_path / "prog.f90").write_text(FORTRAN)
    # a sanitized library needs the runtime linked into the program (compiled.py's way)
    sanitize = [f"-fsanitize={c_client.sanitize}", "-g"] if c_client.sanitize else []
    subprocess.run(
        ["mpif90", "-std=f2018", "-Wall", "-Werror", *sanitize, f"-I{modules}",
         str(tmp_path / "prog.f90"),
         "-o", str(tmp_path / "prog"), f"-L{lib}", "-lmelissa_trainer_fortran_mpi",
         "-lmelissa_trainer_fortran", "-lmelissa_trainer_client", f"-Wl,-rpath,{lib}"],
        check=True, timeout=60,
    )  # fmt: skip
    env = {**os.environ, **MPI_SANITIZER_ENV} if c_client.sanitize else None
    proc = subprocess.run(
        [mpiexec, "-n", "2", str(tmp_path / "prog"), other],
        capture_output=True, text=True, timeout=50, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.splitlines()) == [
        f"{rank} {MT_EMPI} {_words(rank, FORTRAN_OTHER[other][rank])}" for rank in (0, 1)
    ]
