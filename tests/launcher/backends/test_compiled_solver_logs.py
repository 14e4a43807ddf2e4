"""A compiled solver's lines reach its log when a study stop kills it (SIGTERM from
`LocalBackend.kill`, as `Study` stops its jobs). Its stdout is a file, where gfortran's
and C's runtimes buffer in blocks: a solver killed mid-run left an EMPTY log. Real
solvers, built here with gfortran and the C compiler; the oracle is the log's text."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tooling import missing_tool

from melissa_trainer.launcher.backends import Job, LocalBackend

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="setpriv, process groups")

#: prints three lines, then says it did (a file: stdout is the log under test), then
#: runs until killed
FORTRAN_SOLVER = """\
program solver
  implicit none
  integer :: i, u
  do i = 0, 2
    print '(a,i0,a)', 'step ', i, ' sent'
  end do
  open(newunit=u, file='printed', status='replace')
  close(u)
  call sleep(60)  ! (GNU; execute_command_line would flush every unit first)
end program solver
"""

#: the same in C, with the line docs/how-to/compiled-solver.md gives C solvers
C_SOLVER = """\
#include <stdio.h>
#include <unistd.h>
int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < 3; i++) printf("step %d sent\\n", i);
    fclose(fopen("printed", "w"));
    sleep(60);
    return 0;
}
"""


def build(compiler: str, source: str, suffix: str, out: Path) -> Path:
    if shutil.which(compiler) is None:
        missing_tool(f"needs {compiler}")
    path = out / f"solver{suffix}"
    path.write_text(source)
    exe = out / "solver"
    subprocess.run([compiler, "-o", str(exe), str(path)], check=True, timeout=120)
    return exe


def stopped_log(tmp_path: Path, exe: Path, env: dict[str, str] | None = None) -> str:
    """The log of `exe` run as a local job, killed (SIGTERM) once it said it printed."""
    backend = LocalBackend()
    log = tmp_path / "sim-0.log"
    handle = backend.launch(Job("sim-0", [str(exe)], env=env or {}, cwd=tmp_path, log_path=log))
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "printed").exists():
            assert backend.poll(handle) is None, log.read_text()
            assert time.monotonic() < deadline, "the solver never printed"
            time.sleep(0.01)
        assert backend.kill(handle, grace=10) is None  # (the kill ended it)
        assert backend.poll(handle) == -signal.SIGTERM
    finally:
        backend.close()
    return log.read_text()


LINES = "step 0 sent\nstep 1 sent\nstep 2 sent\n"


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_gfortran_solvers_lines_reach_its_log_before_a_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs run with GFORTRAN_UNBUFFERED_PRECONNECTED=y (`Job.full_env`). Failed before:
    the log was empty. A job that sets the variable itself keeps its own (buffered)."""
    monkeypatch.delenv("GFORTRAN_UNBUFFERED_PRECONNECTED", raising=False)
    exe = build("gfortran", FORTRAN_SOLVER, ".f90", tmp_path)
    assert LINES in stopped_log(tmp_path, exe)
    (tmp_path / "printed").unlink()
    (tmp_path / "sim-0.log").unlink()
    own = stopped_log(tmp_path, exe, {"GFORTRAN_UNBUFFERED_PRECONNECTED": "n"})
    assert "step" not in own, own  # (as the job asked: buffered, lost by the kill)


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_c_solver_with_the_documented_setvbuf_keeps_its_lines(tmp_path: Path) -> None:
    """C's stdio has no environment switch: the one line docs/how-to/compiled-solver.md
    gives keeps the lines of a C solver stopped mid-run (without it: an empty log)."""
    exe = build("gcc", C_SOLVER, ".c", tmp_path)
    assert LINES in stopped_log(tmp_path, exe)
    unbuffered = C_SOLVER.replace("setvbuf(stdout, NULL, _IOLBF, 0);", "")
    (tmp_path / "printed").unlink()
    (tmp_path / "sim-0.log").unlink()
    exe = build("gcc", unbuffered, ".c", tmp_path)
    assert "step" not in stopped_log(tmp_path, exe)  # (the loss the line avoids)
