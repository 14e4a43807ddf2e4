"""The C client's `mt_predict` from its other builds, against the real `PredictServer`
(`predict_server`): the Fortran module's (an answer, its input and output checks, a
timeout), and the C paths under AddressSanitizer and UBSan (no leak, nothing read out of
bounds). The wire and the C paths themselves are in test_c_predict.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from compiled import (  # noqa: F401 (a fixture)
    SANITIZER_ENV,
    CClient,
    compile_fortran_program,
    sanitized_c_client,
)
from predict_script import (
    MT_EDTYPE,
    MT_ESHAPE,
    MT_ETIMEDOUT,
    Script,
    dead_endpoint,
    start_lines,
    status,
)
from predict_server import VERSION, answering_server

pytestmark = pytest.mark.e2e  # every test here starts a process


FORTRAN = r"""
program predict
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  real(c_float) :: u(4) = [1, 2, 3, 4], v(3) = [1, 2, 3], y(4), big(5), two(2, 2)
  real(c_float) :: wide(8) = [1, 0, 2, 0, 3, 0, 4, 0]
  real(c_double) :: u64(4) = [1, 2, 3, 4], y64(4), retry
  integer(c_int64_t) :: version
  integer :: ierr
  character(len=256) :: sink, dead
  call get_environment_variable('SINK', sink)
  call get_environment_variable('DEAD', dead)
  call mt_create(client)
  call mt_set_endpoints(client, trim(sink))
  call mt_declare_field(client, 'x', MT_FLOAT32, [3])
  call mt_start(client)
  call mt_predict(client, 'u', u, 'y', y, version, 20.0_c_double, ierr)
  print '(i0, 1x, i0, 4(1x, f0.1))', ierr, version, y
  call mt_predict(client, 'u', v, 'y', y, version, 20.0_c_double, ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_predict(client, 'u', u64, 'y', y64, version, 20.0_c_double, ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_predict(client, 'u', u, 'y', big, version, 20.0_c_double, ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_predict(client, 'u', wide(1:8:2), 'y', y, version, 20.0_c_double, ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_predict(client, 'u', u, 'y', two, version, 20.0_c_double, ierr)
  print '(i0, 1x, 4(1x, f0.1))', ierr, two
  call mt_set_serve_endpoints(client, trim(dead))
  call mt_predict(client, 'u', u, 'y', y, version, 120.0_c_double, ierr)
  print '(i0, 1x, i0)', ierr, mt_predict_refusal(client, retry)
  call mt_predict(client, 'u', u, 'y', y, version, 120.0_c_double, ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_abort(client)
end program
"""


def test_fortran_predict_answers_and_errors(
    c_client: CClient,
    sink: str,
    tmp_path: Path,
) -> None:
    """The Fortran module's mt_predict: an answer (any rank of output with the right
    size), an input of another shape or type refused before sending, an output array
    of another size (MT_ESHAPE), a non-contiguous section (MT_EINVAL), and an endpoint
    where nothing listens (a trainer gone): MT_ETIMEDOUT at once, not after the 120 s
    the request was given (more than the program's 60), then the backoff's."""
    binary = compile_fortran_program(c_client, FORTRAN, tmp_path, "predict")
    env = {**os.environ, "SINK": sink, "MELISSA_TRAINER_SIMULATION_ID": "0"}
    env["DEAD"] = dead_endpoint()
    env["MELISSA_TRAINER_RENDEZVOUS"] = str(tmp_path / "rv")
    with answering_server(tmp_path / "rv") as (server, _):
        proc = subprocess.run(
            [str(binary)], capture_output=True, text=True, timeout=60, env=env, check=False
        )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["0", str(VERSION), "19.0", "21.0", "23.0", "25.0"]
    assert lines[1] == f"{MT_ESHAPE} mt_predict: input 'u' is <f4 (3,), declared <f4 (4,)"
    assert lines[2] == (
        f"{MT_EDTYPE} mt_predict: input 'u' is <f8 (4,), declared <f4 (4,) (cast it to <f4: "
        "convert the data to float32, dtype MT_FLOAT32)"
    )
    assert lines[3] == f"{MT_ESHAPE} mt_predict: output 'y' has 4 elements, the array 5"
    assert lines[4].startswith("1 mt_predict needs contiguous arrays")
    assert lines[5].split() == ["0", "19.0", "21.0", "23.0", "25.0"]
    assert lines[6] == f"{MT_ETIMEDOUT} 0"
    assert lines[7].startswith(f"{MT_ETIMEDOUT} ") and "at an earlier request" in lines[7]
    assert server.telemetry() == {"requests": 3, "answered": 3}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_predict_paths_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    sink: str,
    tmp_path: Path,
) -> None:
    """Every path of mt_predict (answer, refusals, bad inputs and outputs, a trainer
    gone and the backoff after it) under AddressSanitizer and UBSan: no leak, no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    env = {**SANITIZER_ENV, "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    with answering_server(tmp_path / "rv"):
        script = Script(exe, env)
        try:
            script.send(*start_lines(sink))
            script.send("input u 1 1 4 : 1 2 3 4", "output y 1 4", "predict 20")
            script.send("unstage", "input u 1 1 3 : 1 2 3", "predict 20")
            script.send("unstage", "input u 1 1 4 : 1 2 3 4", "output y 1 1", "predict 20")
            # nobody there: refused at once, then the backoff's (each given 100 s)
            script.send(f"serve {dead_endpoint()}", "predict 100", "predict 100")
            lines, err = script.finish(timeout=120)
        finally:
            script.kill()
    assert "ERROR" not in err and "runtime error" not in err, err
    codes = [status(lines, n)[0] for n in sorted(lines) if lines[n][-1][0].isdigit()]
    assert MT_ESHAPE in codes and MT_ETIMEDOUT in codes
