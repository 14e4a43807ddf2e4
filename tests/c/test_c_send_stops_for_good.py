"""A C solver's send blocked on a receiver that disconnected, whose trainer's stop record
says it stopped for good (the run ended ``end``, failed ``error``, or stopped on this
simulation's non-finite sample), gives up at once, as the Python client's send does
(`send_wait.StoppedForGood`: `StoppedWhileSending`, `RefusedWhileSending`;
tests/client/test_send_stopped_for_good.py), in the same words: the close's sentence
(`gave_up.stop_sentence`; clients/c/src/stop_said.c, the C close's builder) on "time
step N and those queued before it", then "(the send gave up after S s blocked: no
trainer comes back there)"; the C close's status for that kind (MT_ETIMEDOUT,
MT_ESIMREFUSED). Before (clients/c/src/send_wait.c), the C send read the record only as
it gave up after its disconnected timeout (and with a replay window the follow timeout
more): these tests timed out. Both are set here to an hour (`LONG`), far beyond the
tests' own timeout, so that a send that waited for either fails the test by its timeout
marker, never by a figure of the machine's speed: the words say which path was taken
(the stop record's, not "disconnected_timeout" nor "follow_timeout").

The oracle: the Python words composed from the same rendezvous (its record read by
`StopRecords.for_good`, the sentence by `stop_sentence`), word for word but for the
seconds blocked. The receiver runs here (a thread), writes its stop record as a
trainer's does, and stops; the solver's next 1 MiB sends (no copy) block on it."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from predict_script import Script
from test_c_stop_not_needed import ended_ingest
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.gave_up import stop_sentence
from melissa_trainer.client.send_verdict import FLUSHED
from melissa_trainer.client.stop_kinds import ENDED
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.stop_record import RECORD_KEY, StopReason, build_record

pytestmark = [
    pytest.mark.e2e,  # a process of its own (the solver)
    pytest.mark.timeout(90),  # (far below the LONG + LONG a send waited before)
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]

MT_ETIMEDOUT, MT_ESIMREFUSED = 8, 14
SID, RUN = 3, "run-a"
COUNT = 262144  # float32: 1 MiB, sent without a copy (held until ZeroMQ lets go)
#: the disconnected and follow timeouts: a send that waits for them fails the test by
#: its timeout marker (90 s), whatever the machine's load
LONG = 3600
WHOSE = f"simulation {SID} rank 0"

#: kind -> (the stop reason, the C status)
KINDS = {
    "end": (StopReason("end", "max_steps 7 reached"), MT_ETIMEDOUT),
    "error": (StopReason("error", "CUDA out of memory"), MT_ETIMEDOUT),
    "refused": (
        StopReason(
            "nonfinite", "simulation 3 time step 0: NaN in u", simulation_id=SID, time_step=0
        ),
        MT_ESIMREFUSED,
    ),  # fmt: skip
}


def blocked_send(
    exe: Path,
    rendezvous: Path,
    reason: StopReason,
    window: bool,
    env: dict[str, str],
    record: dict[str, Any] | None = None,
) -> tuple[int, str, str]:
    """Simulation 3 sends step 0 to a receiver (run ``run-a``) that then stops with
    `reason` in its stop record (replaced by `record` if given, before the solver sends
    on); then sends on until a send fails. Returns that send's status and message and
    the receiver's endpoint. A send that waited for its disconnected or follow timeout
    (`LONG`) is still blocked when the test's timeout marker ends it."""
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
        setup = [f"disconnected_timeout {LONG}", f"follow_timeout {LONG}", "sndhwm 1"]
        setup += [] if window else ["replay_bytes 0"]
        started = solver.send(f"id {SID}", f"field u 1 1 {COUNT}", *setup, "start",
                              f"send 0 u 1 {COUNT} 0", "flush")  # fmt: skip
        assert solver.wait(started)[-1].strip() == "0", solver.seen
        wait_until(lambda: buffer.stats().put == 1, "the receiver's sample")
        receiver.stop()  # (its stop record written; its connection closed)
        if record is not None:  # (in one rename, as a receiver writes it)
            entry = json.loads((rendezvous / "rank_0.json").read_text())
            (rendezvous / "new.json").write_text(json.dumps({**entry, RECORD_KEY: record}))
            os.replace(rendezvous / "new.json", rendezvous / "rank_0.json")
        last = solver.send(*(f"send {t} u 1 {COUNT} {t}" for t in range(1, 60)), "abort")
        lines, err = solver.finish(80)
    finally:
        if solver is not None:
            solver.kill()
        receiver.stop()
    statuses = [lines[n][-1].split(" ", 1) for n in range(started + 1, last)]
    failed = [s for s in statuses if s[0] != "0"]
    assert failed, "every send went through: nothing blocked"
    endpoint = json.loads((rendezvous / "rank_0.json").read_text())["endpoint"]
    return int(failed[0][0]), (failed[0] + [""])[1], endpoint


#: how each client tells a spare solver to exit 0 (the one difference: the Python
#: client names its exception, the C client its status)
PYTHON_EXIT = "(catch SimulationNotNeeded to exit 0)"
C_EXIT = "(this send returns MT_ETIMEDOUT: exit 0 on it if you start spare solvers on purpose)"


def python_words(rendezvous: Path, endpoint: str, step: int | None) -> str:
    """What the Python send (of `step`; None: a flush's `FLUSHED`) says, but its
    seconds blocked (send_wait.py `_check`), in the C client's words to a spare solver."""
    said = StopRecords(str(rendezvous), [endpoint], RUN, SID, 0, WHOSE).for_good()
    assert said is not None, "the Python client reads no stop for good"
    what = FLUSHED if step is None else f"time step {step} and those queued before it"
    return stop_sentence(WHOSE, what, "were", said, [endpoint]).replace(PYTHON_EXIT, C_EXIT)


def says_what_python_says(code: int, message: str, status: int, rendezvous: Path, endpoint: str):
    assert code == status, message
    step = re.search(r"(?:before it read|so) time step (\d+) and those queued", message)
    assert step is not None, message
    # (blocked, or at the step's look before it blocked once the disconnection was seen:
    # send_wait.c mt_send_stop_look; either at once, on the record)
    tail = r" \(the send gave up (?:after \d+\.\d s blocked|before it blocked): no trainer "
    tail += r"comes back there\)"
    expected = python_words(rendezvous, endpoint, int(step.group(1)))
    assert re.fullmatch(re.escape(expected) + tail, message), (message, expected)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_blocked_send_gives_up_at_once_in_the_python_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    kind: str,
) -> None:
    """No replay window: only the disconnected timeout (`LONG`) bounded the wait."""
    reason, status = KINDS[kind]
    rendezvous = tmp_path / "rv"
    code, message, endpoint = blocked_send(script_exe, rendezvous, reason, False, {})
    says_what_python_says(code, message, status, rendezvous, endpoint)
    assert "died" not in message and "disconnected_timeout" not in message, message
    if kind == "end":
        assert message.startswith(f"{WHOSE}: the trainer stopped before it read time step ")
        assert ENDED in message, message


def test_a_spare_solver_is_told_the_study_did_not_need_it(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A record of a stream that ended on expected_simulations without this simulation
    (its receiver took 1 step of it): the close's words, "this send returns
    MT_ETIMEDOUT"."""
    reason = StopReason("end", "end of stream")
    record = build_record(ended_ingest(1), RUN, reason)
    rendezvous = tmp_path / "rv"
    code, message, endpoint = blocked_send(script_exe, rendezvous, reason, False, {}, record)
    says_what_python_says(code, message, MT_ETIMEDOUT, rendezvous, endpoint)
    assert message.startswith(f"{WHOSE}: the study ended without needing this simulation, so ")
    assert C_EXIT in message, message


def test_a_following_send_does_not_wait_for_a_restart(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A replay window (external mode's default): the send would wait the follow timeout
    (`LONG`) more for a restarted trainer; a trainer that ended never restarts."""
    reason, status = KINDS["end"]
    rendezvous = tmp_path / "rv"
    code, message, endpoint = blocked_send(script_exe, rendezvous, reason, True, {})
    says_what_python_says(code, message, status, rendezvous, endpoint)
    assert "follow_timeout" not in message, message


def test_sanitized(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The same under AddressSanitizer and UBSan (the stop record's buffers freed)."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    reason, status = KINDS["end"]
    rendezvous = tmp_path / "rv"
    code, message, endpoint = blocked_send(exe, rendezvous, reason, False, dict(SANITIZER_ENV))
    says_what_python_says(code, message, status, rendezvous, endpoint)
