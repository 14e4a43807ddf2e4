"""A Fortran solver the trainer refused, calling `mt_send` without `ierr`, writes the
refusal once to stderr, then stops (`error stop` with MT_ESIMREFUSED): the C library
writes "melissa_trainer: mt_send: <sentence>" when its watch learns the refusal
(clients/c/src/admission_watch.c), which is the line the Fortran binding's error
handling writes for a failed call without `ierr` (melissa_trainer_core.f90 mt_finish);
it no longer writes it again. Before, the sentence came twice, back to back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from compiled import CClient, c_client, compile_fortran_program  # noqa: F401 (a fixture)
from helpers import running
from test_c_admission_watch import MT_ESIMREFUSED, STUDY

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SOLVER = """
program told_once
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  real(c_float) :: u(5)
  integer :: t
  u = 1
  call mt_create(client)
  call mt_set_simulation_id(client, 9_c_int64_t)
  call mt_declare_field(client, 'u', MT_FLOAT32, shape(u))
  call mt_start(client)
  do t = 0, 1999999
    call mt_send(client, t, 'u', u)
  end do
  print '(a)', 'never told'
end program
"""


def test_a_fortran_send_without_ierr_writes_the_refusal_once(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    binary = compile_fortran_program(c_client, SOLVER, tmp_path, "told_once")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env["MELISSA_TRAINER_RENDEZVOUS"] = str(tmp_path / "rv")
    with running(rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a"):
        run = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == MT_ESIMREFUSED, (run.returncode, run.stdout, run.stderr)
    said = [line for line in run.stderr.splitlines() if line.startswith("melissa_trainer: ")]
    assert len(said) == 1, run.stderr  # (before: the same line twice)
    assert said[0].startswith("melissa_trainer: mt_send: simulation 9: the trainer's receiver 0")
    assert "field 'u' is float32 (5,) where the study's is float32 (4,)" in said[0], said
