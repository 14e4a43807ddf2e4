"""A C solver that fails with `mt_client_fail` keeps what it sent: the batches it still
held are delivered to a real receiver, which puts every sample of them and does not count
the simulation finished (no BYE), as the Python client's close after an exception,
``close(bye=False)`` (clients/c/src/fail.c). `mt_client_abort`, the immediate end (linger
0), drops those batches.

Before (only `mt_client_abort` to fail with): none of the samples batched before the
failure arrived; the test below, run with ``abort`` in place of ``fail``, waits for its
samples in vain. The oracle is the receiver's own count of the samples it put and of
the simulations it took for finished (`Receiver.telemetry`), and the steps and values
the buffer holds, which mt_script's payload rule gives (byte j of seed s), and the
messages a plain PULL socket gets."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from c_driver import capture, payload, script_exe  # noqa: F401 (fixtures)
from compiled import (  # noqa: F401 (fixtures)
    SANITIZER_ENV,
    CClient,
    c_client,
    compile_fortran_program,
    sanitized_c_client,
)
from helpers import handled, running
from waiting import wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer

pytestmark = pytest.mark.e2e  # every test here starts a process

#: the field mt_script sends (``field u 1 1 4``: 4 float32 a step, 16 bytes)
FIELDS = {"u": ((4,), np.float32)}
STEPS = 5
REASON = "the solver diverged at step 5"


def failing_script(endpoint: str) -> str:
    """An mt_script that sends `STEPS` steps of field u to `endpoint`, batched and held
    60 s (only the close can send them: a flush or the batch delay would hide the loss),
    then fails with `REASON`."""
    sends = "".join(f"send {t} u 1 4 {t}\n" for t in range(STEPS))
    return (
        f"id 3\nendpoints {endpoint}\nbatching 65536 60\nfield u 1 1 4\nstart\n"
        f"{sends}fail {REASON}\n"
    )


def run_solver(exe: Path, tmp_path: Path, script: str) -> tuple[list[str], str]:
    """mt_script's stdout lines and stderr for `script`."""
    path = tmp_path / "solver.txt"
    path.write_text(script)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [str(exe), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **SANITIZER_ENV},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines(), proc.stderr


def delivers_its_batched_samples(exe: Path, tmp_path: Path) -> None:
    """`exe` (an mt_script) fails after `STEPS` batched steps: a real receiver puts every
    one of them, with mt_script's values, counts no simulation finished, and the reason is
    on the solver's stderr."""
    buffer = FIFOBuffer(100)
    with running(buffer, fields=FIELDS, nonfinite="accept") as receiver:
        lines, stderr = run_solver(exe, tmp_path, failing_script(receiver.endpoint))
        # the fail's line: its status MT_OK, no message (everything was delivered)
        assert lines[-1] == f"{6 + STEPS} 0 ", lines
        wait_until(
            lambda: receiver.telemetry()["samples_put"] >= STEPS,
            lambda: f"the {STEPS} samples batched before the failure: {receiver.telemetry()}",
            timeout=20,
        )
        # (every message read handled: a BYE read would have counted the simulation)
        wait_until(lambda: handled(receiver) >= receiver.telemetry()["messages"], "idle", 20)
        telemetry = receiver.telemetry()
        assert telemetry["samples_put"] == STEPS, telemetry
        assert telemetry["simulations_finished"] == 0, telemetry
        got = {int(s["time_step"]): np.asarray(s["u"]) for s in buffer.get_batch(STEPS, 5)}
    assert sorted(got) == list(range(STEPS))
    for t, values in got.items():
        np.testing.assert_array_equal(values, payload(1, 4, t))
    # why it failed, on stderr (a launched simulation's log, quoted by a failure report)
    assert (
        f"melissa_trainer: mt_client_fail: simulation 3 rank 0 failed: {REASON}; no BYE sent "
        "(the run did not finish)"
    ) in stderr.splitlines(), stderr
    assert "ERROR" not in stderr and "runtime error" not in stderr, stderr  # (sanitizers)


@pytest.mark.timeout(90)
def test_a_failed_solver_delivers_its_batched_samples_to_a_receiver(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    delivers_its_batched_samples(script_exe, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_fail_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The fail's close (clients/c/src/fail.c: the batches sent, the reason written, the
    client freed) under AddressSanitizer and UBSan: no leak, no error (`run_solver` runs
    with `SANITIZER_ENV`: a report makes the process exit non-zero)."""
    delivers_its_batched_samples(sanitized_c_client.build_dir / "tests" / "mt_script", tmp_path)


@pytest.mark.timeout(60)
def test_a_failed_solver_sends_its_batch_and_no_bye(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    capture: Any,  # noqa: F811
) -> None:
    """On the wire (a PULL socket keeping every message): HELLO, the steps, nothing after
    (no BYE: the trainer does not count the simulation finished)."""
    cap = capture(1)
    lines, _ = run_solver(script_exe, tmp_path, failing_script(cap.endpoints[0]))
    assert lines[-1] == f"{6 + STEPS} 0 ", lines
    kinds = []
    while cap.socks[0].poll(2000):  # (the solver exited: everything it sent is here)
        kinds.append(cap.socks[0].recv_multipart()[0][P.KIND_AT])
    # (the first step leaves as DATA, the rest batched: test_c_client.py's close too)
    assert kinds == [P.HELLO, P.DATA, P.BATCH], kinds


@pytest.mark.timeout(90)
def test_a_failed_solver_with_a_step_incomplete_delivers_the_complete_ones(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A failure in the middle of a step (field u of step 2 sent, v not) is no MT_EFIELD
    here (mt_client_close's): the two complete steps are delivered and trained on."""
    fields = {"u": ((4,), np.float32), "v": ((1,), np.float32)}
    with running(FIFOBuffer(100), fields=fields, nonfinite="accept") as receiver:
        sends = "".join(f"send {t} u 1 4 {t}\nsend {t} v 1 1 {t}\n" for t in range(2))
        lines, _ = run_solver(
            script_exe,
            tmp_path,
            f"id 4\nendpoints {receiver.endpoint}\nbatching 65536 60\nfield u 1 1 4\n"
            f"field v 1 1 1\nstart\n{sends}send 2 u 1 4 2\nfail\n",
        )
        assert lines[-1] == "12 0 ", lines
        wait_until(
            lambda: receiver.telemetry()["samples_put"] >= 2,
            lambda: f"the 2 complete steps: {receiver.telemetry()}",
            timeout=20,
        )
        wait_until(lambda: handled(receiver) >= receiver.telemetry()["messages"], "idle", 20)
        telemetry = receiver.telemetry()
        assert telemetry["samples_put"] == 2, telemetry
        assert telemetry["simulations_finished"] == 0, telemetry


FORTRAN_SOLVER = """
program failing
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  character(len=256) :: endpoint
  real(c_float) :: u(4)
  integer :: t, ierr
  call get_command_argument(1, endpoint)
  call mt_create(client)
  call mt_set_simulation_id(client, 8_c_int64_t)
  call mt_set_endpoints(client, endpoint)
  call mt_set_batching(client, 65536_c_int64_t, 60.0_c_double)
  call mt_declare_field(client, 'u', MT_FLOAT32, shape(u))
  call mt_start(client)
  do t = 0, STEPS - 1
    u = real(t, c_float)
    call mt_send(client, t, 'u', u)
  end do
  call mt_fail(client, 'REASON', ierr)
  print '(i0)', ierr
end program
""".replace("STEPS", str(STEPS)).replace("REASON", REASON)


@pytest.mark.timeout(240)  # (a compiled program)
def test_a_failed_fortran_solver_delivers_its_batched_samples(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The Fortran binding, `mt_fail` (melissa_trainer.f90): the same delivery."""
    binary = compile_fortran_program(c_client, FORTRAN_SOLVER, tmp_path, "failing")
    buffer = FIFOBuffer(100)
    with running(buffer, fields=FIELDS, nonfinite="accept") as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
        run = subprocess.run(
            [str(binary), str(receiver.endpoint)], env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert (run.returncode, run.stdout.split()) == (0, ["0"]), (run.stdout, run.stderr)
        got = sorted(int(s["time_step"]) for s in buffer.get_batch(STEPS, 20))
        wait_until(lambda: handled(receiver) >= receiver.telemetry()["messages"], "idle", 20)
        assert receiver.telemetry()["simulations_finished"] == 0, receiver.telemetry()
    assert got == list(range(STEPS))
    assert (
        f"melissa_trainer: mt_client_fail: simulation 8 rank 0 failed: {REASON}; no BYE sent "
        "(the run did not finish)"
    ) in run.stderr.splitlines(), run.stderr


@pytest.mark.timeout(60)
def test_after_a_failed_send_the_fail_delivers_nothing_and_says_so(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """After a send's MT_ETIMEDOUT only mt_client_abort may follow: mt_client_fail then
    frees the client as it does, and says so (MT_ESTATE), as mt_client_close."""
    lines, _ = run_solver(
        script_exe,
        tmp_path,
        "id 1\nendpoints tcp://127.0.0.1:9\nsndhwm 1\nsend_timeout 0.2\nbatching 0 1\n"
        "field u 1 1 4\nstart\n"
        + "".join(f"send {t} u 1 4 {t}\n" for t in range(4))
        + "fail the solver saw its send fail\n",
    )
    assert any(line.split(" ")[1] == "8" for line in lines[7:11]), lines  # (MT_ETIMEDOUT)
    assert lines[-1] == (
        "12 5 the client failed earlier (a send timed out or ZeroMQ failed): closed without "
        "BYE, as mt_client_abort does"
    ), lines
