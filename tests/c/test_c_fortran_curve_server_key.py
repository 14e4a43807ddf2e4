"""The Fortran binding of `mt_set_curve_server_key` (melissa_trainer_setup.f90): a
Fortran solver gives the stream's CURVE key as an argument, over MELISSA_TRAINER_KEY, and
a key that is not Z85 comes back in `ierr` (MT_EINVAL) with the C library's message (the
Python client's words, tests/c/test_c_curve_server_key.py). Failed before: the module had
no such procedure (the program did not compile).

The oracle: a real CURVE `Receiver` takes the Fortran solver's steps."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import zmq
from compiled import CClient, c_client, compile_fortran_program  # noqa: F401 (a fixture)
from helpers import running

from melissa_trainer.buffers import FIFOBuffer

pytestmark = [
    pytest.mark.e2e,  # a compiled program
    pytest.mark.timeout(240),
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_EINVAL = 1
SOLVER = """
program keyed
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  character(len=256) :: endpoint, key
  real(c_float) :: u(4)
  integer :: t, ierr
  call get_command_argument(1, endpoint)
  call get_command_argument(2, key)
  call mt_create(client)
  call mt_set_simulation_id(client, 3_c_int64_t)
  call mt_set_curve_server_key(client, 'x', ierr)
  print '(i0,1x,a)', ierr, mt_error_message(client)
  call mt_set_curve_server_key(client, key)
  call mt_set_endpoints(client, endpoint)
  call mt_set_close_timeout(client, 20.0_c_double)
  call mt_declare_field(client, 'u', MT_FLOAT32, shape(u))
  call mt_start(client)
  do t = 0, 2
    u = real(t, c_float)
    call mt_send(client, t, 'u', u)
  end do
  call mt_close(client)
  print '(a)', 'closed'
end program
"""


def test_a_fortran_solver_gives_the_key_as_an_argument(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    binary = compile_fortran_program(c_client, SOLVER, tmp_path, "keyed")
    public, secret = zmq.curve_keypair()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env["MELISSA_TRAINER_KEY"] = zmq.curve_keypair()[0].decode()  # (another trainer's)
    buffer = FIFOBuffer(16)
    with running(buffer=buffer, expected_simulations=1, curve_secret_key=secret) as receiver:
        run = subprocess.run(
            [str(binary), receiver.endpoint, public.decode()],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, (run.returncode, run.stdout, run.stderr)
        got = sorted(int(s["time_step"]) for s in buffer.get_batch(3, timeout=30))
    assert got == [0, 1, 2]  # the oracle: the receiver took them (with the argument's key)
    refused, closed = run.stdout.splitlines()
    assert refused == (
        f"{MT_EINVAL} curve_server_key='x' must be 40 characters, not 1: the trainer's CURVE "
        "public key in Z85, as its rendezvous files publish it (curve_public_key in "
        "rank_N.json) or zmq_curve_keypair() gives it; or NULL for receivers without CURVE"
    ), run.stdout
    assert closed == "closed"
