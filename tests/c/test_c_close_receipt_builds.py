"""The C client's close receipt (docs/protocol.md, section 17b) built in other ways: through
the Fortran module (`mt_set_disconnected_timeout`, `MT_ETIMEDOUT` in `mt_close`'s `ierr`),
and its paths under AddressSanitizer and UBSan. The fake follow socket and its answers:
test_c_close_receipt.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import zmq
from compiled import (  # noqa: F401 (fixtures)
    SANITIZER_ENV,
    CClient,
    c_client,
    compile_fortran_program,
    sanitized_c_client,
)
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import (  # noqa: F401 (a fixture: sink)
    MT_ESIMREFUSED,
    MT_ETIMEDOUT,
    STEPS,
    Answer,
    assert_says_run_again,
    close_status,
    follow_socket,
    publish,
    receipt,
    sink,
)

from melissa_trainer import wire as P
from melissa_trainer.wire.receipt import (
    RECEIPT_BYE,
    RECEIPT_FINISHED,
    RECEIPT_NO_BYE,
    ReceiptQuery,
)

pytestmark = pytest.mark.e2e  # every test here starts a process


FORTRAN_SOLVER = """
program gone
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  real(c_float) :: u(4)
  integer :: t, ierr
  u = 1
  call mt_create(client)
  call mt_set_simulation_id(client, 3_c_int64_t)
  call mt_set_disconnected_timeout(client, 1.0_c_double)
  call mt_set_replay_bytes(client, 1048576_c_int64_t)
  call mt_set_follow_timeout(client, 0.2_c_double)
  call mt_declare_field(client, 'u', MT_FLOAT32, shape(u))
  call mt_start(client)
  do t = 0, 2
    call mt_send(client, t, 'u', u)
  end do
  call mt_close(client, ierr)
  print '(l1, 1x, i0)', ierr == MT_ETIMEDOUT, ierr
  print '(a)', mt_error_message(client)
end program
"""


@pytest.mark.timeout(180)
def test_a_fortran_solver_gets_the_status_when_the_trainer_goes_away(
    c_client: CClient,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """mt_set_disconnected_timeout, the replay window's setters and MT_ETIMEDOUT through
    the Fortran module (gone, and no restarted trainer within the follow timeout)."""
    binary = compile_fortran_program(c_client, FORTRAN_SOLVER, tmp_path, "gone")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env["MELISSA_TRAINER_RENDEZVOUS"] = str(tmp_path / "rv")

    def answer(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE)

    with follow_socket(zctx, answer, gone_after=1) as (follow, asked, _):
        publish(tmp_path / "rv", sink, follow)
        run = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    first, message = run.stdout.splitlines()[:2]
    assert first == f"T {MT_ETIMEDOUT}", run.stdout
    assert_says_run_again(message)
    assert asked and asked[0].bye_steps == STEPS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_receipt_paths_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Not yet then ingested (with a non-finite warning), refused, every sample
    non-finite, gone, rewritten and the close timeout, under AddressSanitizer and UBSan:
    no leak (the sockets, monitors and the rendezvous read again), no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"

    def later(query: ReceiptQuery, before: int) -> bytes:
        if before == 0:
            return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE)
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_BYE, steps=3, bye_steps=3,
                       nonfinite=1)  # fmt: skip

    def refused(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_REFUSED, RECEIPT_NO_BYE, "(wrong_run) another run")

    def all_nonfinite(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_FINISHED, steps=3, nonfinite=3)

    def not_yet(query: ReceiptQuery, before: int) -> bytes:
        if before == 0:
            publish(tmp_path / "rewritten", sink, "tcp://127.0.0.1:1", run="run-b")
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE)

    cases: list[tuple[str, Answer, int | None, tuple[str, ...], int]] = [
        ("later", later, None, (), 0),
        ("refused", refused, None, (), MT_ESIMREFUSED),
        ("nonfinite", all_nonfinite, None, (), MT_ESIMREFUSED),
        ("gone", not_yet, 1, ("disconnected_timeout 1", "follow_timeout 0.2"), MT_ETIMEDOUT),
        ("rewritten", not_yet, None, ("replay_bytes 0",), MT_ETIMEDOUT),
        ("timeout", not_yet, None, ("close_timeout 1",), MT_ETIMEDOUT),
    ]
    for name, answer, gone_after, setup, expected in cases:
        with follow_socket(zctx, answer, gone_after) as (follow, _, _):
            publish(tmp_path / name, sink, follow)
            code, message, err = close_status(exe, tmp_path / name, *setup, **SANITIZER_ENV)
        assert code == expected, (name, message)
        assert "ERROR" not in err and "runtime error" not in err, err
