"""heat_c ends where it fails even when `MPI_Abort` returns.

A user trial (htrial47): the encrypted heat study's solver started by hand, 2 ranks, with
`MELISSA_TRAINER_ENDPOINTS` and no key; one run in 5 to 10 printed "double free or
corruption (out)" after rank 0's "application called MPI_Abort". AddressSanitizer
(`mpiexec -disable-auto-cleanup`) showed a heap-use-after-free in `mt_send`
(`mt_clear_error`) called from heat.c's time loop: `check` had freed the client
(`mt_client_abort`) and called `MPI_Abort`, which returned (MPICH's hydra, while the other
rank aborted too), and the loop went on with the freed client. `check` now ends the
process itself after `MPI_Abort`.

Here `MPI_Abort` is made to return (an LD_PRELOAD shim), the failure a malformed endpoint
(no receiver needed): heat_c must exit 1 after one message, not go on.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from compiled import CClient, c_client, find_mpicc  # noqa: F401 (c_client: a fixture)
from tooling import missing_tool

HEAT_C = Path(__file__).resolve().parents[2] / "examples" / "heat_c" / "heat.c"
#: e2e: it builds the C client (the shared fixture) and compiles heat.c: over 5 s
pytestmark = pytest.mark.e2e

SHIM = """
int MPI_Abort(void *comm, int code) { (void)comm; (void)code; return 0; }
"""


@pytest.mark.timeout(180)
def test_heat_c_exits_after_a_failure_when_mpi_abort_returns(
    c_client: CClient,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    mpicc = find_mpicc()
    if mpicc is None:
        missing_tool("needs mpicc next to mpiexec (pip install mpich)")
    binary, shim = tmp_path / "heat_c", tmp_path / "shim.so"
    (tmp_path / "shim.c").write_text(SHIM)
    subprocess.run(
        ["cc", "-shared", "-fPIC", str(tmp_path / "shim.c"), "-o", str(shim)], check=True
    )
    prefix = c_client.prefix
    subprocess.run(
        [mpicc, "-std=c11", "-g", f"-I{prefix}/include", str(HEAT_C), f"-L{prefix}/lib",
         "-lmelissa_trainer_client", f"-Wl,-rpath,{prefix}/lib", "-lm", "-o", str(binary)],
        check=True,
    )  # fmt: skip
    env = {
        **os.environ,
        "LD_PRELOAD": str(shim),
        "MELISSA_TRAINER_SIMULATION_ID": "0",
        "MELISSA_TRAINER_ENDPOINTS": "tcp://localhost",  # no port: MT_EENV at the start
        "MELISSA_TRAINER_PARAMETERS": '{"t_initial": 300, "t_left": 100, "t_right": 500, '
        '"t_bottom": 200, "t_top": 400}',
    }
    env.pop("MELISSA_TRAINER_RENDEZVOUS", None)
    proc = subprocess.Popen(
        [str(binary), "8", "8", "4"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
        # An MPI singleton that aborts leaves its segment (mpich_shm_<pid in hex>_N).
        for leftover in Path("/dev/shm").glob(f"mpich_shm_{proc.pid:x}_*"):
            leftover.unlink(missing_ok=True)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    said = [line for line in done.stderr.splitlines() if line.startswith("heat_c:")]
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert len(said) == 1 and "has no port" in said[0], done.stderr
