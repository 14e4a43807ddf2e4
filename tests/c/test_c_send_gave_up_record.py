"""A C solver's send that its send timeout ends, while a receiver is disconnected and a
stop record says why, leads with what the record says, as the Python client's send does
(client/send_wait.py `SendWait.timeout`: the record read afresh as it gives up):

* a record saying the trainer stopped for good (``end``, ``error``, or this simulation's
  non-finite sample): the close's sentence (`gave_up.stop_sentence`; the C builder,
  clients/c/src/stop_said.c) on "time step N and those queued before it", then
  "(send_timeout=T s ended the send)", Python's words; the close's status for that kind
  (MT_ETIMEDOUT; MT_ESIMREFUSED for this simulation's sample);
* a record saying the trainer was preempted (a resume may come: not for good): the
  disconnected receiver is said to be gone for "the trainer was preempted (MESSAGE; its
  stop record in DIR)" (`StopRecords.preempted`, the words the disconnected timeout's
  message and the close already say) in place of "the trainer died or was restarted".

Before (clients/c/src/send_wait.c), the C send read the record only between two slices
of 0.5 s: one that the send timeout ended before its next look (here a send timeout
shorter than a slice: no look at all) said "the trainer's receiver at E is disconnected
for N s without a new connection (the trainer died or was restarted, or its node)",
whatever the record said: these tests failed.

The receiver runs here (a thread), writes its stop record as a trainer's does, and
stops; the test waits until the solver's ZeroMQ has dropped the connection (its
monitor then holds the disconnection), then the solver's next 1 MiB sends (no copy)
block and the send timeout ends one."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from predict_script import Script
from test_c_send_stops_for_good import KINDS, python_words
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.stop_record import StopReason

pytestmark = [
    pytest.mark.e2e,  # a process of its own (the solver)
    pytest.mark.timeout(90),
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]

MT_ETIMEDOUT = 8
SID, RUN = 3, "run-a"
COUNT = 262144  # float32: 1 MiB, sent without a copy (held until ZeroMQ lets go)
#: shorter than a slice (0.5 s): the blocked send never looked at the record before (and
#: long enough for step 0 to reach a receiver on a loaded machine)
SEND_TIMEOUT = 0.45
WHOSE = f"simulation {SID} rank 0"
PREEMPTED = StopReason("preempted", "stopped by SIGTERM")


def connected(pid: int, port: int) -> bool:
    """Whether process `pid` still holds a TCP connection to `port` (ESTABLISHED, or
    CLOSE_WAIT: the peer closed it, ZeroMQ not done with it yet). ZeroMQ sends the
    monitor's DISCONNECTED event before it closes the socket (stream_engine_base's
    error()), so once none is held the client can read that the receiver is down."""
    held = (psutil.CONN_ESTABLISHED, psutil.CONN_CLOSE_WAIT)
    return any(
        conn.raddr and conn.raddr.port == port and conn.status in held
        for conn in psutil.Process(pid).net_connections(kind="tcp")
    )


def timed_out_send(
    exe: Path, rendezvous: Path, reason: StopReason, env: dict[str, str]
) -> tuple[int, str, str]:
    """Simulation 3 sends step 0 to a receiver (run ``run-a``) that then stops with
    `reason` in its stop record; once the solver dropped the connection, it sends on
    (send timeout `SEND_TIMEOUT`, disconnected timeout 120 s) until a send fails.
    Returns that send's status and message, and the receiver's endpoint."""
    buffer = FIFOBuffer(100)
    config = ReceiverConfig(
        rendezvous_dir=str(rendezvous), fields={"u": ((COUNT,), np.float32)}, run_id=RUN
    )
    receiver = Receiver(buffer, 0, 1, config)
    receiver.start()
    solver = None
    try:
        receiver.note_stop(reason)
        solver = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous), **env})
        started = solver.send(f"id {SID}", f"field u 1 1 {COUNT}", "disconnected_timeout 120",
                              "sndhwm 1", "replay_bytes 0", f"send_timeout {SEND_TIMEOUT}",
                              "start", f"send 0 u 1 {COUNT} 0", "flush")  # fmt: skip
        assert solver.wait(started)[-1].strip() == "0", solver.seen
        wait_until(lambda: buffer.stats().put == 1, "the receiver's sample")
        endpoint = json.loads((rendezvous / "rank_0.json").read_text())["endpoint"]
        receiver.stop()  # (its stop record written; its connection closed)
        port = int(endpoint.rsplit(":", 1)[1])
        wait_until(lambda: not connected(solver.proc.pid, port), "the solver's disconnection",
                   procs=[solver.proc])  # fmt: skip
        last = solver.send(*(f"send {t} u 1 {COUNT} {t}" for t in range(1, 60)), "abort")
        lines, err = solver.finish(80)
    finally:
        if solver is not None:
            solver.kill()
        receiver.stop()
    statuses = [lines[n][-1].split(" ", 1) for n in range(started + 1, last)]
    failed = [s for s in statuses if s[0] != "0"]
    assert failed, "every send went through: nothing blocked"
    return int(failed[0][0]), (failed[0] + [""])[1], endpoint


def says_what_python_says(code: int, message: str, status: int, rendezvous: Path, endpoint: str):
    """`message` is the Python send's (`SendWait.timeout`) but for the C client's words
    to a spare solver (`python_words`), `status` the close's for that kind."""
    assert code == status, message
    step = re.search(r"(?:before it read|so) time step (\d+) and those queued", message)
    assert step is not None, message
    expected = python_words(rendezvous, endpoint, int(step.group(1)))
    expected += f" (send_timeout={SEND_TIMEOUT} s ended the send)"  # (SendWait.timeout)
    assert message == expected, (message, expected)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_timed_out_send_leads_with_the_stop_record(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    kind: str,
) -> None:
    reason, status = KINDS[kind]
    rendezvous = tmp_path / "rv"
    code, message, endpoint = timed_out_send(script_exe, rendezvous, reason, {})
    says_what_python_says(code, message, status, rendezvous, endpoint)
    assert "died" not in message and "back-pressure" not in message, message


def test_a_timed_out_send_says_the_trainer_was_preempted(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Not for good: no stop sentence; the disconnected receiver's clause names the
    record (`StopRecords.preempted`'s words) where it said "died or was restarted"."""
    rendezvous = tmp_path / "rv"
    code, message, endpoint = timed_out_send(script_exe, rendezvous, PREEMPTED, {})
    assert code == MT_ETIMEDOUT, message
    cause = StopRecords(str(rendezvous), [endpoint], RUN, SID, 0, WHOSE).preempted()
    assert cause is not None, "the Python client reads no preemption"
    assert message.startswith(f"{WHOSE}: could not send time step "), message
    assert f" within send_timeout={SEND_TIMEOUT} s: the trainer's receiver at {endpoint} " in (
        message
    )
    assert re.search(r"is disconnected for \d+ s without a new connection \(" + re.escape(cause)
                     + r"\)\. Close the client with mt_client_abort", message), message  # fmt: skip
    assert "died" not in message, message


def test_sanitized(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The same under AddressSanitizer and UBSan (the records read afresh, freed)."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    rendezvous = tmp_path / "rv"
    reason, status = KINDS["end"]
    code, message, endpoint = timed_out_send(exe, rendezvous, reason, dict(SANITIZER_ENV))
    says_what_python_says(code, message, status, rendezvous, endpoint)
    preempted = tmp_path / "rv2"
    code, message, _ = timed_out_send(exe, preempted, PREEMPTED, dict(SANITIZER_ENV))
    assert code == MT_ETIMEDOUT and "the trainer was preempted (stopped by SIGTERM; " in message
