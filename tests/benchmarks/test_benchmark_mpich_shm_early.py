"""benchmarks/mpich_shm_early.py end to end, one job per case: a C solver failing right
after MPI_Init (segmentation fault, MPI_Abort, exit(1)) or 2 s in leaves its MPICH file
under mpiexec alone, and none under `MpiexecBackend`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "mpich_shm_early.py"


@pytest.mark.timeout(180)
def test_a_failing_jobs_file_is_left_by_mpiexec_alone_and_not_by_the_backend() -> None:
    mpiexec = find_mpiexec()
    if mpiexec is None or shutil.which("mpicc", path=str(Path(mpiexec).parent)) is None:
        pytest.skip(NO_MPI + ", with mpicc beside mpiexec")
    command = [sys.executable, str(BENCHMARK), "--quick", "--ranks", "2", "--json"]
    command += ["--mpiexec", mpiexec]  # (the one the test found: not PATH's first)
    done = subprocess.run(command, capture_output=True, text=True, timeout=150, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not out["private_shm"]:  # (another test's MPI job would be counted)
        pytest.skip("counts only with a /dev/shm of its own (root, a mount namespace)")
    cases = [r["case"].split(",")[0] for r in out["rows"]]
    assert cases == ["segv", "abort", "exit1", "late"]
    assert [(r["ours"], r["baseline"]) for r in out["rows"]] == [(0, 1)] * 4, out["rows"]
