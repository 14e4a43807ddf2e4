"""A trainer killed (SIGKILL) just as a C solver closes, started by hand: its BYE has
left the solver, but the trainer has not read it, and dies. PUSH/PULL acknowledges
nothing, so the close must not return `MT_OK` (before the close receipt it did, and the
last steps were lost without a word): it fails (`MT_ETIMEDOUT`) saying that the trainer
did not confirm the BYE and to run the simulation again with the same simulation id
(docs/protocol.md, section 17b). A normal external run still closes with `MT_OK`.

The moment is made exact, not timed (as tests/checkpoint/test_external_close.py): the
receiver runs in a process of its own on a FIFO of 2 samples, so that its ingest blocks
on the full buffer after the solver's first steps and never reads the rest nor the BYE
(back-pressure); the solver's close asks its question only once its sockets delivered
everything (the BYE left), and the receiver marks the first question it gets, with
whether the BYE was in at that moment (the oracle that it was not); the test kills the
receiver on that mark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import running
from predict_script import Script

from melissa_trainer.wire.layout import RECEIPT_QUERY
from melissa_trainer.wire.receipt import RECEIPT_NO_BYE

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL of a process of its own"),
]

MT_ETIMEDOUT = 8
STEPS = 20

RECEIVER = """
import json, sys, threading
from pathlib import Path
import numpy as np
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import follow_server
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.wire.receipt import decode_receipt_query

rendezvous, mark = sys.argv[1], Path(sys.argv[2])
server = follow_server.FollowServer
receipt, admission = server._hold_or_answer, server.answer_admission

def marked(said):  # (the first question the follow socket gets: the BYE left the solver)
    if not mark.exists():
        mark.with_suffix(".tmp").write_text(json.dumps(said))
        mark.with_suffix(".tmp").rename(mark)

def asked_receipt(self, identity, query):
    now = self._receipt_now(decode_receipt_query(query))
    marked({"kind": 13, "admission": now[0], "bye": now[1]})
    return receipt(self, identity, query)

def asked_admission(self, query):  # (its sends' question, admission_watch.c: unmarked)
    return admission(self, query)

server._hold_or_answer, server.answer_admission = asked_receipt, asked_admission
config = ReceiverConfig(rendezvous_dir=rendezvous, fields={"u": ((4,), np.float32)},
                        run_id="run-a")
Receiver(FIFOBuffer(2), 0, 1, config).start()  # (nothing takes from the buffer: it fills)
print("started", flush=True)
threading.Event().wait()
"""


def wait_until(what: str, condition: object, timeout: float = 60.0) -> None:
    """Poll `condition` (a callable) until true, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.02)


def solver_lines(sid: int) -> list[str]:
    sends = [f"send {t} u 1 4 {t}" for t in range(STEPS)]
    # (follow_timeout: with its replay window the close waits that long for a restarted
    # trainer once the receiver is gone, then fails as without one)
    return [f"id {sid}", "field u 1 1 4", "disconnected_timeout 2", "follow_timeout 1",
            "start", *sends, "close"]  # fmt: skip


@pytest.mark.timeout(180)
def test_a_trainer_killed_before_it_read_the_bye_fails_the_c_solvers_close(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous, mark = tmp_path / "rv", tmp_path / "asked.json"
    script_file = tmp_path / "receiver.py"
    script_file.write_text(RECEIVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    receiver = subprocess.Popen(
        [sys.executable, str(script_file), str(rendezvous), str(mark)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    solver = None
    try:
        wait_until("rendezvous file", (rendezvous / "rank_0.json").exists)
        solver = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        closed = solver.send(*solver_lines(5))
        wait_until("question at the close", mark.exists)
        receiver.send_signal(signal.SIGKILL)
        assert receiver.wait(30) == -signal.SIGKILL
        lines, err = solver.finish()
    finally:
        if solver is not None:
            solver.kill()
        if receiver.poll() is None:
            receiver.kill()
        receiver.wait()
    code, _, message = lines[closed][-1].partition(" ")
    assert all(int(lines[n][-1].split(" ", 1)[0]) == 0 for n in range(1, closed)), lines
    # (before the fix: 0, the ADMISSION question answered "accepted" or not at all)
    assert int(code) == MT_ETIMEDOUT, (code, message, err)
    message = message.strip()
    assert message.startswith("simulation 5 rank 0: its BYE was not confirmed: the trainer's "
                              "receiver 0 (tcp://"), message  # fmt: skip
    assert "has not answered, nor been connected, for 2.0 s" in message, message
    advice = (
        "may be lost: once a trainer runs there again (a preempted one: "
        "--resume_from_checkpoint latest), run it again with the same simulation id "
        "(MELISSA_TRAINER_SIMULATION_ID=5)"
    )
    assert advice in message, message
    said = json.loads(mark.read_text())  # (the receipt asked, and the BYE not in then)
    assert said == {"kind": RECEIPT_QUERY, "admission": 1, "bye": RECEIPT_NO_BYE}, said


@pytest.mark.timeout(120)
def test_a_normal_external_run_closes_ok_once_the_trainer_has_its_bye(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The trainer's receiver (a FIFO of 1000) ingests everything: MT_OK, and the
    receiver's own record holds the simulation finished, every step once. The script's
    generated payloads hold NaN or Inf at some steps, as float32 (the receiver refuses
    those samples): the first send of one says so once, the close warns with their count,
    both computed here from the same bytes."""
    fields = {"u": ((4,), np.float32)}
    with running(rendezvous_dir=tmp_path / "rv", fields=fields, run_id="run-a") as receiver:
        solver = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")})
        try:
            closed = solver.send(*solver_lines(6))
            lines, err = solver.finish()
        finally:
            solver.kill()
        # (confirmed before the close returned: no wait here)
        ledger = receiver.ingest.sims.get(6)
        held = (
            ledger.completed if ledger is not None and ledger.finished
            else receiver.ingest.archive.steps.get(6)
        )  # fmt: skip
    assert lines[closed][-1].strip() == "0", (lines[closed], err)
    nonfinite = [t for t in range(STEPS) if not np.isfinite(payload(t)).all()]
    assert 0 < len(nonfinite) < STEPS  # (the warnings' case; none: nothing said)
    assert err == (
        # (the send's notice, once: the first field holding NaN or Inf)
        f"melissa_trainer: simulation 6 rank 0: field 'u' of time step {nonfinite[0]} holds "
        f"NaN or Inf; it is sent without FLAG_FINITE and the trainer applies its nonfinite "
        f"policy to it (by default the sample is dropped). Later non-finite fields of this "
        f"client are not logged.\n"
        f"melissa_trainer: mt_client_close: simulation 6 rank 0: the trainer refused "
        f"{len(nonfinite)} of the {STEPS} samples of this simulation as non-finite: NaN or Inf in "
        f"its fields (the trainer's receivers refuse such samples: nonfinite='refuse'): fix "
        f"the solver (a diverging scheme: a smaller time step?), or let the trainer take "
        f"them with ReceiverConfig(nonfinite='accept') if the loss handles them\n"
    ), err
    assert held == STEPS, held


def payload(seed: int) -> np.ndarray:
    """What mt_script sends with `seed`: byte j is (seed * 31 + j * 7) & 255 (4 float32)."""
    data = bytes((seed * 31 + j * 7) & 255 for j in range(16))
    return np.frombuffer(data, "<f4")
