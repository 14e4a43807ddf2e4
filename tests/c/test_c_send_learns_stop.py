"""A C solver's send whose queue is NOT full learns that its trainer stopped for good (its
stop record says "end" or "error") and fails as a blocked send does, with the same status
(MT_ETIMEDOUT) and the Python client's words (`send_wait.SendWait.look`;
tests/client/test_send_learns_stop.py): the close's sentence, then "(the send gave up
before it blocked: no trainer comes back there)" (clients/c/src/send_wait.c
mt_send_stop_look, called by mt_send as it opens a step).

Before, only a send that found ZeroMQ's queue full read the record: a user trial's
solver started by hand computed 2,400 steps into its queue after its trainer ended. The
oracle: the sends made after the end, each `PACE` s apart at least, are bounded
(`BOUND`), whatever the queue's size (sndhwm 1000 messages of 64 bytes: every send here
would fit); before the change none failed. Control: a trainer preempted (a resumed one
is followed) fails none of the same sends.

The receiver runs here (a thread), writes its stop record as a trainer's does, and
stops; the solver is mt_script, fed its lines."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from predict_script import Script
from test_c_send_stops_for_good import python_words
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.send_wait import LOOK_EVERY
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.stop_record import StopReason

pytestmark = [
    pytest.mark.e2e,  # a process of its own (the solver)
    pytest.mark.timeout(90),
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]

MT_ETIMEDOUT = 8
SID, RUN, COUNT = 3, "run-a", 16  # (16 float32: batched, the queue never fills)
PACE = 0.05  # the solver's seconds per step (a sleep line between two sends)
#: the sends after the receiver stopped that may go through: the disconnection seen, then
#: a look at most `LOOK_EVERY` s later (one more look of margin: the monitor's event)
BOUND = math.ceil(2 * LOOK_EVERY / PACE) + 2
SENDS = 4 * BOUND  # (what the solver is given: all go through unless a send fails)


def sends_after_stop(exe: Path, rendezvous: Path, reason: StopReason) -> tuple[list, str]:
    """Simulation 3 (external mode, no replay window, sndhwm 1000) sends step 0 to a
    receiver (run ``run-a``) that then stops with `reason` in its stop record; then sends
    steps 1.. `SENDS`, `PACE` s apart. Returns each send's [status, message] and the
    receiver's endpoint."""
    buffer = FIFOBuffer(100)
    config = ReceiverConfig(
        rendezvous_dir=str(rendezvous), fields={"u": ((COUNT,), np.float32)}, run_id=RUN
    )
    receiver = Receiver(buffer, 0, 1, config)
    receiver.start()
    solver = None
    try:
        receiver.note_stop(reason)
        solver = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        setup = ["disconnected_timeout 3600", "sndhwm 1000", "replay_bytes 0"]
        started = solver.send(f"id {SID}", f"field u 1 1 {COUNT}", *setup, "start",
                              f"send 0 u 1 {COUNT} 0", "flush")  # fmt: skip
        assert solver.wait(started)[-1].strip() == "0", solver.seen
        wait_until(lambda: buffer.stats().put == 1, "the receiver's sample")
        receiver.stop()  # (its stop record written; its connection closed)
        lines = [f"send {t} u 1 {COUNT} {t}" for t in range(1, SENDS + 1)]
        paced = [x for line in lines for x in (f"sleep {PACE}", line)]
        last = solver.send(*paced, "abort")
        seen, _ = solver.finish(80)
    finally:
        if solver is not None:
            solver.kill()
        receiver.stop()
    sends = [n for n in range(started + 2, last, 2)]  # (the send lines: after each sleep)
    statuses = [(seen[n][-1].split(" ", 1) + [""])[:2] for n in sends]
    endpoint = json.loads((rendezvous / "rank_0.json").read_text())["endpoint"]
    return statuses, endpoint


@pytest.mark.parametrize("code", ["end", "error"])
def test_a_send_with_room_fails_once_the_trainer_stopped_for_good(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    code: str,
) -> None:
    reason = StopReason(code, "max_steps 200 reached")
    rendezvous = tmp_path / "rv"
    statuses, endpoint = sends_after_stop(script_exe, rendezvous, reason)
    failed = [n for n, (status, _) in enumerate(statuses) if status != "0"]
    assert failed, f"all {SENDS} sends went through after the trainer ended"
    assert failed[0] < BOUND, (failed[0], BOUND)
    status, message = statuses[failed[0]]
    assert int(status) == MT_ETIMEDOUT, message
    step = re.search(r"(?:before it read|so) time step (\d+) and those queued", message)
    assert step is not None and int(step.group(1)) == failed[0] + 1, message
    expected = python_words(rendezvous, endpoint, failed[0] + 1)
    tail = " (the send gave up before it blocked: no trainer comes back there)"
    assert message == expected + tail, (message, expected)


def test_a_preempted_trainer_fails_no_send_with_room(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A resumed trainer is followed: "preempted" fails none of the sends, which span
    several looks (`SENDS` * `PACE` s)."""
    reason = StopReason("preempted", "SIGTERM: checkpoint saved")
    statuses, _ = sends_after_stop(script_exe, tmp_path / "rv", reason)
    assert [s for s in statuses if s[0] != "0"] == []


def test_a_flush_learns_the_trainer_stopped_for_good(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """mt_flush looks at the stop records as a send does (send.c; Python's
    `Transport.flush`): a solver whose last calls are flushes, its queue empty, fails
    with the send's status and words, "any messages still queued at this flush" for the
    step. Before, each flush
    returned 0 after the trainer ended ("end": no trainer comes back there)."""
    rendezvous = tmp_path / "rv"
    buffer = FIFOBuffer(100)
    config = ReceiverConfig(
        rendezvous_dir=str(rendezvous), fields={"u": ((COUNT,), np.float32)}, run_id=RUN
    )
    receiver = Receiver(buffer, 0, 1, config)
    receiver.start()
    solver = None
    try:
        receiver.note_stop(StopReason("end", "max_steps 200 reached"))
        solver = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        setup = ["disconnected_timeout 3600", "sndhwm 1000", "replay_bytes 0"]
        started = solver.send(f"id {SID}", f"field u 1 1 {COUNT}", *setup, "start",
                              f"send 0 u 1 {COUNT} 0", "flush")  # fmt: skip
        assert solver.wait(started)[-1].strip() == "0", solver.seen
        wait_until(lambda: buffer.stats().put == 1, "the receiver's sample")
        receiver.stop()
        last = solver.send(*[x for _ in range(SENDS) for x in (f"sleep {PACE}", "flush")], "abort")
        seen, _ = solver.finish(80)
    finally:
        if solver is not None:
            solver.kill()
        receiver.stop()
    statuses = [(seen[n][-1].split(" ", 1) + [""])[:2] for n in range(started + 2, last, 2)]
    failed = [n for n, (status, _) in enumerate(statuses) if status != "0"]
    assert failed, f"all {SENDS} flushes returned 0 after the trainer ended"
    assert failed[0] < BOUND, (failed[0], BOUND)
    status, message = statuses[failed[0]]
    assert int(status) == MT_ETIMEDOUT, message
    endpoint = json.loads((rendezvous / "rank_0.json").read_text())["endpoint"]
    tail = " (the send gave up before it blocked: no trainer comes back there)"
    assert message == python_words(rendezvous, endpoint, None) + tail, message
