"""A C or Fortran solver the trainer refuses fails at close (docs/protocol.md, section
17a), as a Python one does: started by hand with its endpoints from the rendezvous,
a solver whose HELLO a receiver refused (another grid than the study's) gets
`MT_ESIMREFUSED` from `mt_client_close`, the receiver's reason in its message, not
`MT_OK` as if trained on (before: `MT_OK`, exit status 0). The right grid still closes
with `MT_OK`; a launched simulation (`MELISSA_TRAINER_ATTEMPT`) does not ask.

The oracles: the real `Receiver`'s own record of whom it refused and completed, and the
Python client's `SimulationRefused` against the same receiver, whose message the C
client's must equal."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import CClient, c_client, compile_fortran_program  # noqa: F401 (a fixture)
from helpers import running

from melissa_trainer.client import Client
from melissa_trainer.client.admission import SimulationRefused

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ESIMREFUSED = 14
FLOAT32 = 1  # the protocol's dtype code
STUDY = {"u": ((4,), np.float32)}


def solve(
    exe: Path, tmp_path: Path, rendezvous: Path, sid: int, n: int, **env: str
) -> tuple[int, str]:
    """A C solver started by hand (its endpoints from the rendezvous): three steps of a
    field `u` of `n` float32; the status and message of its close."""
    sends = "".join(f"send {t} u {FLOAT32} {n} {t}\n" for t in range(3))
    script = f"id {sid}\nfield u {FLOAT32} 1 {n}\nstart\n{sends}close\n"
    result = run_script(
        exe, script, tmp_path, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous), **env}, timeout=60
    )
    # (a send may be told of the refusal already: admission_watch.c, test_c_admission_watch)
    assert all(code in (0, 14) for line, (code, _) in result.items() if line < 7), result
    return result[7]


def python_refusal(rendezvous: Path, sid: int, n: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Python client's SimulationRefused message, for the same solver."""
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    client = Client(simulation_id=sid, fields={"u": ((n,), np.float32)})
    with contextlib.suppress(SimulationRefused):  # (said at a send if known: its watch)
        for t in range(3):
            client.send(t, u=np.zeros(n, np.float32))
    with pytest.raises(SimulationRefused) as refused:
        client.close()
    return str(refused.value)


@pytest.mark.timeout(120)
def test_a_refused_c_solver_fails_its_close_with_the_receivers_reason(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running(rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a") as receiver:
        wrong = solve(script_exe, tmp_path, tmp_path / "rv", 3, 5)
        right = solve(script_exe, tmp_path, tmp_path / "rv", 4, 4)
        launched = solve(script_exe, tmp_path, tmp_path / "rv", 5, 5, MELISSA_TRAINER_ATTEMPT="0")
        python = python_refusal(tmp_path / "rv", 6, 5, monkeypatch)
        refused = [sid for sid, _ in receiver.refused()]
    assert sorted(refused) == [3, 5, 6]  # (the receiver's own record)
    code, message = wrong
    # (before the fix: (0, ""))
    assert code == MT_ESIMREFUSED, wrong
    assert "field 'u' is float32 (5,) where the study's is float32 (4,)" in message, message
    assert "Run it again declaring the study's fields" in message
    assert message == python.replace("simulation 6:", "simulation 3:")
    assert right == (0, ""), right
    assert launched == (0, ""), launched  # (a launched simulation's refusal is the study's)


FORTRAN_SOLVER = """
program refused
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  real(c_float) :: u(5)
  character(len=8) :: mode
  integer :: t, ierr
  call get_command_argument(1, mode)
  u = 1
  call mt_create(client)
  call mt_set_simulation_id(client, 9_c_int64_t)
  call mt_declare_field(client, 'u', MT_FLOAT32, shape(u))
  call mt_start(client)
  do t = 0, 2
    call mt_send(client, t, 'u', u, ierr)  ! (MT_ESIMREFUSED if told already: the close says it)
  end do
  if (mode == 'stop') call mt_close(client)  ! no ierr: error stop with the status
  call mt_close(client, ierr)
  print '(l1, 1x, i0)', ierr == MT_ESIMREFUSED, ierr
  print '(a)', mt_error_message(client)
end program
"""


@pytest.mark.timeout(180)
def test_a_refused_fortran_solver_gets_the_status_and_the_reason(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    binary = compile_fortran_program(c_client, FORTRAN_SOLVER, tmp_path, "refused")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env["MELISSA_TRAINER_RENDEZVOUS"] = str(tmp_path / "rv")
    with running(rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a"):
        runs = [
            subprocess.run([str(binary), mode], env=env, capture_output=True, text=True, timeout=60)
            for mode in ("ierr", "stop")
        ]
    with_ierr, stopped = runs
    assert with_ierr.returncode == 0, with_ierr.stderr
    first, reason = with_ierr.stdout.splitlines()[:2]
    assert first == f"T {MT_ESIMREFUSED}", with_ierr.stdout
    assert reason.startswith("simulation 9: the trainer's receiver 0 (tcp://"), reason
    assert "field 'u' is float32 (5,) where the study's is float32 (4,)" in reason
    assert stopped.returncode == MT_ESIMREFUSED, stopped.stderr  # (before: 0)
    assert "melissa_trainer: mt_close: simulation 9: the trainer's receiver 0" in stopped.stderr
