"""heat_fortran stops at a refused argument even when `MPI_Abort` returns, as heat_c does
(tests/examples/test_heat_c_abort_returns.py: MPICH's `MPI_Abort` can return, and heat.c's
`die` then exits itself).

Before, heat.f90's `usage` printed its message and called `MPI_Abort`, and nothing after:
with `MPI_Abort` returning, the program went on with the argument it had just refused.
Here `MPI_Abort` returns (an LD_PRELOAD shim of the C `MPI_Abort` and `PMPI_Abort`, which
MPICH's Fortran `MPI_Abort` calls); heat_fortran, given an NX that is not a number, must
exit 2 after its one usage line, and say nothing more.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from compiled import CClient, c_client  # noqa: F401 (c_client: a fixture)
from tooling import missing_tool

HEAT_F90 = Path(__file__).resolve().parents[2] / "examples" / "heat_c" / "heat.f90"
#: e2e: it builds the C client (the shared fixture) and compiles heat.f90: over 5 s
pytestmark = pytest.mark.e2e

SHIM = """
int MPI_Abort(void *comm, int code) { (void)comm; (void)code; return 0; }
int PMPI_Abort(void *comm, int code) { (void)comm; (void)code; return 0; }
"""


@pytest.mark.timeout(180)
def test_heat_fortran_stops_at_a_refused_argument_when_mpi_abort_returns(
    c_client: CClient,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    if shutil.which("mpif90") is None:
        missing_tool("needs mpif90 (an MPI Fortran with mpi_f08)")
    modules, lib = c_client.prefix / "include" / "fortran", c_client.prefix / "lib"
    if not (modules / "melissa_trainer_mpi.mod").exists():
        missing_tool("melissa_trainer_mpi was not built: no MPI Fortran with mpi_f08")
    binary, shim = tmp_path / "heat_fortran", tmp_path / "shim.so"
    (tmp_path / "shim.c").write_text(SHIM)
    subprocess.run(
        ["cc", "-shared", "-fPIC", str(tmp_path / "shim.c"), "-o", str(shim)], check=True
    )
    subprocess.run(
        ["mpif90", "-std=f2018", f"-I{modules}", str(HEAT_F90), "-o", str(binary), f"-L{lib}",
         "-lmelissa_trainer_fortran_mpi", "-lmelissa_trainer_fortran",
         "-lmelissa_trainer_client", f"-Wl,-rpath,{lib}"],
        check=True,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_TRAINER_")}
    proc = subprocess.Popen(
        [str(binary), "x", "8", "4"],
        env={**env, "LD_PRELOAD": str(shim)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
        # An MPI singleton that aborts leaves its segment (mpich_shm_<pid in hex>_N).
        for leftover in Path("/dev/shm").glob(f"mpich_shm_{proc.pid:x}_*"):
            leftover.unlink(missing_ok=True)
    said = [line for line in (out + err).splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.returncode, said)
    assert said[0] == "heat_fortran: NX must be a positive integer", said
    assert not [line for line in said if "melissa_trainer" in line or "heat_fortran" in line][1:], (
        said
    )
