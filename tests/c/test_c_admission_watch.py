"""A C solver the trainer refused learns it at an `mt_send`, not only at its close
(clients/c/src/admission_watch.c; docs/protocol.md, section 17a), as a Python one does
(tests/client/test_admission_watch.py): once the receiver has refused its HELLO, a send
returns `MT_ESIMREFUSED` with the close's sentence (the receiver, its reason naming the
field, the fix), within a bounded number of sends, and so does every later one; a solver
the trainer took is never told; a solver given its endpoints directly is not asked
(unchanged: every send `MT_OK`). Before the watch, every send of a refused C solver
returned `MT_OK` and only its close said so.

The solver is `mt_script` (tests/c_driver.py) driven a line at a time, so that the test
waits for the receiver's own record of the refusal (`Receiver.refused`) before it sends,
not for a time. The Fortran binding passes the status through (`ierr`): a Fortran
solver sending until told gets `MT_ESIMREFUSED` at a send."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import CClient, c_client, compile_fortran_program  # noqa: F401 (a fixture)
from helpers import running
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

MT_ESIMREFUSED = 14
FLOAT32 = 1  # the protocol's dtype code
STUDY = {"u": ((4,), np.float32)}
#: sends a refused solver may make before it is told, once the receiver refused its
#: HELLO: the watch reads the reply of a query at most 2 ms after it asked (REPLY_POLL_S)
#: and asks again within 10 ms of an unknown, so a bound in time; this count is that
#: time many times over at a send per round trip of this test's pipe
MAX_SENDS = 20000
SUFFIX = (
    ". Told while it ran: every mt_send and mt_predict from now on returns MT_ESIMREFUSED, "
    "and sends nothing"
)


class Solver:
    """`mt_script` run a command at a time: `do(line)` is its (status, message)."""

    def __init__(self, exe: Path, env: dict[str, str], stderr: Path) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
        self.err = stderr.open("w")
        self.proc = subprocess.Popen(
            [str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
            text=True, env={**clean, **env},
        )  # fmt: skip

    def do(self, line: str) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"mt_script ended at {line!r}: {self.proc.wait(10)}"
        _, status, *message = answer.rstrip("\n").split(" ", 2)
        return int(status), " ".join(message).strip()

    def end(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.err.close()


@contextmanager
def solver(exe: Path, tmp_path: Path, sid: int, name: str, **env: str) -> Iterator[Solver]:
    """A started C solver declaring one float32 field `name` of 4 (the study's is `u`)."""
    s = Solver(exe, env, tmp_path / f"stderr_{sid}.txt")
    try:
        for line in (f"id {sid}", f"field {name} {FLOAT32} 1 4", "start"):
            assert s.do(line) == (0, ""), line
        yield s
    finally:
        s.end()


def refused_here(receiver: Receiver, sid: int) -> Callable[[], bool]:
    """Whether the receiver's own record lists simulation `sid`'s HELLO as refused."""
    return lambda: sid in [s for s, _ in receiver.refused()]


def test_a_refused_c_solver_is_told_at_a_send_naming_the_field(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    with (
        running(rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a") as receiver,
        solver(script_exe, tmp_path, 3, "v", **rendezvous) as s,
    ):
        wait_until(refused_here(receiver, 3), "the receiver's refusal", procs=[s.proc])
        sends = 0
        status, told = 0, ""
        while status == 0 and sends < MAX_SENDS:  # (before the watch: MAX_SENDS, all 0)
            status, told = s.do(f"send {sends} v {FLOAT32} 4 {sends}")
            sends += 1
        assert status == MT_ESIMREFUSED, (sends, status, told)
        assert s.do(f"send {sends} v {FLOAT32} 4 0") == (MT_ESIMREFUSED, told)  # every one
        closed = s.do("close")
    assert "simulation 3: the trainer's receiver 0 (tcp://" in told, told
    assert "field 'v' is not one of the study's" in told, told
    assert "Run it again declaring the study's fields" in told
    assert closed[0] == MT_ESIMREFUSED, closed  # (the close says it again, without the suffix)
    assert told == closed[1] + SUFFIX
    said = (tmp_path / "stderr_3.txt").read_text()
    assert said.count(f"melissa_trainer: mt_send: {told}\n") == 1, said  # (once, at once)


def test_a_c_solver_refused_for_its_parameters_order_is_told_at_a_send(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """No names given to the receiver: the first simulation's order (a, b) is the
    study's; a C solver listing them (b, a) is refused, and told at a send (before:
    `mt_admission_describes` did not trust that refusal; every send returned MT_OK)."""
    rendezvous = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    buffer = FIFOBuffer(100)
    with running(buffer, rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a") as receiver:
        first = Solver(script_exe, rendezvous, tmp_path / "stderr_1.txt")
        try:
            for line in ("id 1", f"field u {FLOAT32} 1 4", "param a 1", "param b 2", "start"):
                assert first.do(line) == (0, ""), line
            assert first.do(f"send 0 u {FLOAT32} 4 0") == (0, "")
            wait_until(lambda: len(buffer) > 0, "the first simulation's sample", procs=[first.proc])
        finally:
            first.end()
        s = Solver(script_exe, rendezvous, tmp_path / "stderr_2.txt")
        try:
            for line in ("id 2", f"field u {FLOAT32} 1 4", "param b 2", "param a 1", "start"):
                assert s.do(line) == (0, ""), line
            wait_until(refused_here(receiver, 2), "the receiver's refusal", procs=[s.proc])
            sends, status, told = 0, 0, ""
            while status == 0 and sends < MAX_SENDS:
                status, told = s.do(f"send {sends} u {FLOAT32} 4 {sends}")
                sends += 1
        finally:
            s.end()
    assert status == MT_ESIMREFUSED, (sends, status, told)
    assert "HELLO lists its parameters in the order ['b', 'a']" in told, told


def test_a_c_solver_taken_is_never_told_nor_one_given_its_endpoints(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    room = FIFOBuffer(10**5)  # (a full buffer would hold the HELLO after 2000 steps)
    with running(room, rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a") as receiver:
        given = {"MELISSA_TRAINER_ENDPOINTS": str(receiver.endpoint)}
        results = {}
        for sid, name, env in ((4, "u", rendezvous), (5, "v", given)):
            with solver(script_exe, tmp_path, sid, name, **env) as s:
                if name == "v":
                    wait_until(refused_here(receiver, sid), "the refusal", procs=[s.proc])
                # (a run as long as the refused one's bound, so that the taken one's
                # watch has its answer: the receivers say accepted within it)
                statuses = {s.do(f"send {t} {name} {FLOAT32} 4 {t}")[0] for t in range(2000)}
                results[sid] = (statuses, s.do("close"))
        refused = [sid for sid, _ in receiver.refused()]
    assert results[4] == ({0}, (0, "")), results[4]
    assert results[5] == ({0}, (0, "")), results[5]  # (endpoints given: nothing asked)
    assert refused == [5]


FORTRAN_SOLVER = """
program told
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  real(c_float) :: u(5)
  integer :: t, ierr
  u = 1
  call mt_create(client)
  call mt_set_simulation_id(client, 9_c_int64_t)
  call mt_declare_field(client, 'u', MT_FLOAT32, shape(u))
  call mt_start(client)
  ierr = 0
  t = 0
  do while (ierr == 0 .and. t < 2000000)
    call mt_send(client, t, 'u', u, ierr)
    t = t + 1
  end do
  print '(l1, 1x, i0)', ierr == MT_ESIMREFUSED, ierr
  print '(a)', mt_error_message(client)
  call mt_close(client, ierr)
  print '(i0)', ierr
end program
"""


def test_a_refused_fortran_solver_gets_the_status_at_a_send(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    # (sends until told, at most 2e6 of 5 floats: the receiver refuses the HELLO within
    # the first of them; before the watch, every one returned 0)
    binary = compile_fortran_program(c_client, FORTRAN_SOLVER, tmp_path, "told")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env["MELISSA_TRAINER_RENDEZVOUS"] = str(tmp_path / "rv")
    with running(rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a"):
        run = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    first, reason, closed = run.stdout.splitlines()[:3]
    assert first == f"T {MT_ESIMREFUSED}", run.stdout
    assert reason.startswith("simulation 9: the trainer's receiver 0 (tcp://"), reason
    assert "field 'u' is float32 (5,) where the study's is float32 (4,)" in reason
    assert reason.endswith(SUFFIX), reason
    assert closed == str(MT_ESIMREFUSED), run.stdout
