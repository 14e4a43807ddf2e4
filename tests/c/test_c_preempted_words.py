"""What a C solver's blocked send, and its close, say when its trainer was preempted (a
user trial: the Python client's send and close say "the trainer was preempted (MESSAGE;
its stop record in DIR)" from the trainer's stop record,
tests/client/test_send_preempted_words.py, test_close_preempted_words.py; the C client's
said "the trainer died, or its node", whatever the record said). Now
clients/c/src/send_wait.c and close_wait.c read the record once they give up or tell
(stop_said.c mt_stop_preempted_words), in the Python client's words. Failed before the
change.

The receiver runs here (a thread of this process): it takes step 0, notes the stop
reason "preempted" as a trainer's receiver does on SIGTERM, and stops (its rendezvous file
marked stopped, with the record); the solver's next sends, or its close, find no
receiver, block, and give up after its disconnected timeout (1 s; no replay window: no
follow wait)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import Script
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.stop_record import StopReason

pytestmark = [
    pytest.mark.e2e,  # a process of its own (the solver)
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]

MT_ETIMEDOUT = 8
#: float32 per step: 1 MiB, sent without a copy (the wait for the arrays, as
#: test_c_send_receiver_gone.py's "large": small steps may be batched, never blocked)
COUNT = 262144


#: what a close says of a record's resumable code (client/stopped.py's words, Python's)
OPENING = {
    "preempted": "the trainer was preempted",
    "broken": "the trainer stopped on a broken collective, a resume may follow",
}


def preempted_then(
    exe: Path,
    rendezvous: Path,
    *commands: str,
    code: str = "preempted",
    message: str = "stopped by SIGTERM",
    restarts_left: int | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[int, int, dict[int, list[str]], str]:
    """Simulation 3 sends step 0 to a receiver (run ``run-a`` in `rendezvous`) that then
    stops, its stop record saying preempted (`code`, `message`); then the solver runs
    `commands` (`restarts_left`: the record's, of ``error``; `edit`: changes the
    record as written, before the commands). Returns the
    index of the flush of step 0, that of the last command, the solver's lines and its
    stderr."""
    buffer = FIFOBuffer(100)
    config = ReceiverConfig(
        rendezvous_dir=str(rendezvous), fields={"u": ((COUNT,), np.float32)}, run_id="run-a"
    )
    receiver = Receiver(buffer, 0, 1, config)
    receiver.start()
    solver = None
    try:
        receiver.note_stop(StopReason(code, message, restarts_left=restarts_left))
        solver = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        started = solver.send("id 3", f"field u 1 1 {COUNT}", "disconnected_timeout 1",
                              "sndhwm 1", "replay_bytes 0", "start",
                              f"send 0 u 1 {COUNT} 0", "flush")  # fmt: skip
        assert solver.wait(started)[-1].strip() == "0", solver.seen
        wait_until(lambda: buffer.stats().put == 1, "the receiver's sample")
        receiver.stop()  # (its stop record: preempted; its connection closed)
        if edit is not None:
            path = rendezvous / "rank_0.json"
            entry = json.loads(path.read_text())
            edit(entry["stop_record"])
            path.write_text(json.dumps(entry))
        last = solver.send(*commands)
        lines, err = solver.finish(120)
    finally:
        if solver is not None:
            solver.kill()
        receiver.stop()
    return started, last, lines, err


def said_preempted(message: str, rendezvous: Path, code: str = "preempted") -> None:
    assert "the receiver is unreachable, disconnected for " in message, message
    assert (
        f"(mt_set_disconnected_timeout=1.0 s; {OPENING[code]} (stopped by SIGTERM; "
        f"its stop record in {rendezvous})" in message
    ), message
    assert "died" not in message, message


def test_a_blocked_send_says_the_trainer_was_preempted(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / "rv"
    sends = (f"send {t} u 1 {COUNT} {t}" for t in range(1, 120))
    started, last, lines, err = preempted_then(script_exe, rendezvous, *sends, "abort")
    statuses = [lines[n][-1].split(" ", 1) for n in range(started + 1, last)]
    failed = [s for s in statuses if s[0] != "0"]
    assert failed, "every send went through: nothing blocked"
    code, message = failed[0][0], failed[0][1] if len(failed[0]) > 1 else ""
    assert int(code) == MT_ETIMEDOUT, (failed[0], err)
    assert message.startswith("simulation 3 rank 0: could not send time step "), message
    said_preempted(message, rendezvous)


@pytest.mark.parametrize("record", ["preempted", "broken"])
def test_a_close_says_the_trainer_was_preempted(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    record: str,
) -> None:
    """Its error, and the notice it prints on stderr while it waits. ``broken`` (a
    collective broke with every peer alive: hstop) in its own words; failed before (the
    record refused for its unknown code: "the trainer died")."""
    rendezvous = tmp_path / "rv"
    _, closed, lines, err = preempted_then(script_exe, rendezvous, "close", code=record)
    code, message = (lines[closed][-1].split(" ", 1) + [""])[:2]
    assert int(code) == MT_ETIMEDOUT, (lines[closed], err)
    assert message.startswith("simulation 3 rank 0: "), message
    said_preempted(message, rendezvous, record)
    notice = [line for line in err.splitlines() if ": closing, the trainer's receiver" in line]
    assert len(notice) == 1, err
    assert f"{OPENING[record]} (stopped by SIGTERM; its stop record in " in notice[0], err
    assert "died" not in notice[0], err


def test_a_preempted_message_is_quoted_as_python_quotes_it(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Its first line, at most 200 characters (stop_said.c through json_repr.c
    mt_reason_line; Python's reason_line.said_line: tests/client/
    test_close_preempted_words.py). Failed before: its first 200 bytes, which cut a
    3-byte character and took 66 of 300."""
    rendezvous = tmp_path / "rv"
    message = "x" + "€" * 300 + "\nthe next line"
    _, closed, lines, err = preempted_then(script_exe, rendezvous, "close", message=message)
    code, said = (lines[closed][-1].split(" ", 1) + [""])[:2]
    assert int(code) == MT_ETIMEDOUT, (lines[closed], err)
    assert f"the trainer was preempted (x{'€' * 199}; its stop record in {rendezvous})" in said, (
        said
    )
