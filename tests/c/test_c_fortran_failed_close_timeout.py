"""The Fortran binding of `mt_set_failed_close_timeout` (melissa_trainer_setup.f90): a
Fortran solver closing with a time step incomplete (MT_EFIELD, no BYE) to a receiver
connected but not reading is bounded by the failed close timeout it set (1 s), not its
close timeout (600 s), and `mt_close`'s message names it (the C client's words:
tests/c/test_c_failed_close_timeout.py). A NaN comes back in `ierr` (MT_EINVAL). Failed
before: the module had no such procedure (the program did not compile).

The receiver: a real PULL socket that completed the ZeroMQ handshake and reads nothing
(`slow_pull`, never started); the solver queued 8 batches of 256 KiB for it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from compiled import CClient, c_client, compile_fortran_program  # noqa: F401 (a fixture)
from slow_pull import slow_pull

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]  # a compiled program

MT_EINVAL, MT_EFIELD = 1, 2
SOLVER = """
program failing
  use, intrinsic :: iso_c_binding
  use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  character(len=256) :: endpoint
  real(c_double) :: u(512), v(512)
  integer :: t, ierr
  call get_command_argument(1, endpoint)
  call mt_create(client)
  call mt_set_simulation_id(client, 6_c_int64_t)
  call mt_set_endpoints(client, endpoint)
  call mt_set_failed_close_timeout(client, ieee_value(1.0_c_double, ieee_quiet_nan), ierr)
  print '(i0,1x,a)', ierr, mt_error_message(client)
  call mt_set_close_timeout(client, 600.0_c_double)
  call mt_set_disconnected_timeout(client, 600.0_c_double)
  call mt_set_failed_close_timeout(client, 1.0_c_double)
  call mt_set_batching(client, 262144_c_int64_t, 60.0_c_double)
  call mt_declare_field(client, 'u', MT_FLOAT64, shape(u))
  call mt_declare_field(client, 'v', MT_FLOAT64, shape(v))
  call mt_start(client)
  do t = 0, 511
    u = real(t, c_double)
    v = u
    call mt_send(client, t, 'u', u)
    call mt_send(client, t, 'v', v)
  end do
  call mt_send(client, 512, 'u', u)
  call mt_close(client, ierr)
  print '(i0,1x,a)', ierr, mt_error_message(client)
end program
"""


def test_a_fortran_close_without_bye_is_bounded_by_the_failed_close_timeout(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    binary = compile_fortran_program(c_client, SOLVER, tmp_path, "failing")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    with slow_pull(1.0) as receiver:  # (never started: it reads nothing)
        run = subprocess.run(
            [str(binary), receiver.endpoint], env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr)
    refused, closed = run.stdout.splitlines()
    assert refused == f"{MT_EINVAL} failed_close_timeout must be a number of seconds", refused
    assert closed.startswith(
        f"{MT_EFIELD} closed with time step 512 incomplete: field(s) 'v' missing; no BYE sent "
        "(the run did not finish); and simulation 6 rank 0: "
    ), closed
    assert closed.endswith(
        f" not delivered within failed_close_timeout=1.0 s to ['{receiver.endpoint}'] (the "
        "bound of a close without BYE, not close_timeout: mt_set_failed_close_timeout sets "
        "it; < 0 leaves only close_timeout)"
    ), closed
