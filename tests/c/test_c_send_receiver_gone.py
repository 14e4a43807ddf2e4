"""A C solver's send blocked on a full queue (clients/c/src/send_wait.c): it gives up on a
trainer gone, never on one merely slow.

* The receiver (a process of its own, on a FIFO of 1 that nothing takes from, rcvhwm 1)
  stops reading after its first sample; the solver (sndhwm 1) sends more than the queues
  and the kernel's buffers hold, so a send blocks, whatever the moment of the kill; the
  receiver is SIGKILLed: the blocked send returns MT_ETIMEDOUT naming the endpoint and
  the setting (disconnected timeout 1 s here). Before: it blocked for ever (the test's
  timeout). Large arrays (sent without a copy: the wait for them) and batched steps.
* A receiver SIGSTOPped (the connection stays: back-pressure) makes the send wait, longer
  than the disconnected timeout, and complete once SIGCONTed: every send MT_OK, and the
  close too (the trainer confirmed the BYE with every step: its own count).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import Script

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL, SIGSTOP of a process"),
]

MT_ETIMEDOUT = 8

# argv: rendezvous, mark, field count, "take" (a thread takes the samples) or not
RECEIVER = """
import sys, threading
from pathlib import Path
import numpy as np
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

rendezvous, mark, count, take = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
buffer = FIFOBuffer(1)
config = ReceiverConfig(rendezvous_dir=rendezvous, fields={"u": ((count,), np.float32)},
                        run_id="run-a", rcvhwm=1)
Receiver(buffer, 0, 1, config).start()

def taker():
    while True:
        if not buffer.get_batch(1):
            return
        if not mark.exists():
            mark.write_text("taken")

if take == "take":
    threading.Thread(target=taker, daemon=True).start()
print("started", flush=True)
threading.Event().wait()
"""


def wait_until(what: str, condition: object, timeout: float = 60.0) -> None:
    """Poll `condition` (a callable) until true, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.02)


def start_receiver(tmp: Path, count: int, take: bool) -> tuple[subprocess.Popen[str], Path]:
    rendezvous = tmp / "rv"
    script = tmp / "receiver.py"
    script.write_text(RECEIVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(rendezvous), str(tmp / "taken"), str(count),
         "take" if take else "no"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_until("rendezvous file", (rendezvous / "rank_0.json").exists)
    return proc, rendezvous


# (count: float32 per step; setup: the script's lines before start; steps: more than the
# queues hold, 1 MiB large, 32 KiB batched by 1 MB)
CASES = {
    "large": (262144, ["sndhwm 1", "follow_timeout 1"], 120),
    "batched": (8192, ["sndhwm 1", "replay_bytes 0", "batching 1000000 10"], 2000),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.timeout(180)
def test_a_send_blocked_when_the_receiver_is_killed_times_out(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    case: str,
) -> None:
    count, setup, steps = CASES[case]
    receiver, rendezvous = start_receiver(tmp_path, count, take=False)
    solver = None
    try:
        solver = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        started = solver.send("id 3", f"field u 1 1 {count}", "disconnected_timeout 1", *setup,
                              "start", f"send 0 u 1 {count} 0")  # fmt: skip
        assert solver.wait(started)[-1].strip() == "0", solver.seen
        receiver.send_signal(signal.SIGKILL)
        assert receiver.wait(30) == -signal.SIGKILL
        last = solver.send(*(f"send {t} u 1 {count} {t}" for t in range(1, steps)), "abort")
        lines, err = solver.finish(120)
    finally:
        if solver is not None:
            solver.kill()
        if receiver.poll() is None:
            receiver.kill()
        receiver.wait()
    statuses = [lines[n][-1].split(" ", 1) for n in range(started + 1, last)]
    failed = [s for s in statuses if s[0] != "0"]
    assert failed, "every send went through: the queues did not fill"
    code, message = failed[0][0], failed[0][1] if len(failed[0]) > 1 else ""
    assert int(code) == MT_ETIMEDOUT, (failed[0], err)
    assert message.startswith("simulation 3 rank 0: could not send time step "), message
    assert "waiting for the trainer to take the messages queued to tcp://" in message, message
    assert "the receiver is unreachable, disconnected for " in message, message
    assert "(mt_set_disconnected_timeout=1.0 s; the trainer died, or its node)" in message
    assert "Close the client with mt_client_abort" in message, message
    # once, before it gave up, what it waits for (send_notice.c; said nothing before)
    notices = [line for line in err.splitlines() if ": sending time step " in line]
    assert len(notices) == 1, err
    assert re.match(
        r"melissa_trainer: simulation 3 rank 0: sending time step \d+, the trainer's receiver "
        r"at tcp://\S+ is disconnected since \d\d:\d\d:\d\d \(\d+ s: the trainer died or "
        r"stopped, or its node\): \d+ time step\(s\) were sent to it\. The send waits up to "
        r"\d+ s more for it to reconnect \(mt_set_disconnected_timeout=1\.0 s\)",
        notices[0],
    ), notices[0]
    follows = case == "large"  # (a replay window: a restarted trainer is followed)
    assert (
        "(mt_set_follow_timeout=1.0 s) for a restarted trainer to publish in" in notices[0]
    ) == follows
    assert notices[0].endswith(
        "mt_set_disconnected_timeout and mt_set_follow_timeout shorten it; nothing more is "
        "said until the send ends."
        if follows
        else "mt_set_disconnected_timeout shortens it; nothing more is said until the send ends."
    ), notices[0]


@pytest.mark.timeout(180)
def test_a_send_blocked_on_a_stopped_receiver_completes_once_it_continues(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    count, steps = 262144, 120
    receiver, rendezvous = start_receiver(tmp_path, count, take=True)
    solver = None
    try:
        solver = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        started = solver.send("id 4", f"field u 1 1 {count}", "disconnected_timeout 0.2",
                              "sndhwm 1", "follow_timeout 0.2", "start",
                              f"send 0 u 1 {count} 0")  # fmt: skip
        assert solver.wait(started)[-1].strip() == "0", solver.seen
        wait_until("a sample taken", (tmp_path / "taken").exists)
        receiver.send_signal(signal.SIGSTOP)
        last = solver.send(*(f"send {t} u 1 {count} {t}" for t in range(1, steps)))
        # the solver blocks (the queues full) for 4 s, 10 times its disconnected timeout
        # and follow timeout: a send that gave up on the stopped trainer would be done
        done = threading.Event()
        reader = threading.Thread(target=lambda: (solver.wait(last), done.set()), daemon=True)
        reader.start()
        assert not done.wait(4.0), solver.seen
        assert solver.proc.poll() is None
        receiver.send_signal(signal.SIGCONT)
        reader.join(120)
        assert done.is_set()
        closed = solver.send("close")
        lines, err = solver.finish(120)
    finally:
        if solver is not None:
            solver.kill()
        if receiver.poll() is None:
            receiver.send_signal(signal.SIGCONT)
            receiver.kill()
        receiver.wait()
    for n in range(started, closed + 1):
        assert lines[n][-1].split(" ", 1)[0] == "0", (n, lines[n], err)
