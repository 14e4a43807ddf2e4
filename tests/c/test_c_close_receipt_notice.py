"""A C solver's close whose BYE the trainer does not confirm says so once on stderr
while it waits, as the Python close's receipt phase does (receipts.py Rounds._tell;
clients/c/src/close_notice.c): which receiver has neither answered nor been connected
since when, what the close waits for, how long in all and the setters that shorten it,
then nothing more until the close ends. The words: the Python text with the C setters
(tests/close_words.py `c_words`), compared here on the solver's
real stderr, its clock and seconds aside.

The receipt is slow for good: the trainer's receiver (a process of its own, a FIFO of 2:
it never reads the BYE) is killed once the close asked its first question
(test_c_close_receipt_killed.py's scenario, whose receiver this is). Before, the C
solver's stderr held nothing for the whole receipt wait: only the final error."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from close_words import c_words
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import Script
from test_c_close_receipt_killed import MT_ETIMEDOUT, RECEIVER, STEPS, wait_until

from melissa_trainer.client import ClientTuning
from melissa_trainer.client.receipts import Rounds

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL of a process of its own"),
]

SID = 5
PREFIX = f"melissa_trainer: mt_client_close: simulation {SID} rank 0: closing, its BYE "


def numbers_aside(text: str) -> str:
    """`text` with its clock and whole seconds as placeholders (they vary by run)."""
    text = re.sub(r"\d\d:\d\d:\d\d", "HH:MM:SS", text)
    return re.sub(r"(?<![\d.])\d+ s\b", "N s", text)


def python_notice(follow: str, rendezvous: str) -> str:
    """The Python close's receipt notice for this test's settings, in C words."""
    tuning = ClientTuning(close_timeout=600.0, disconnected_timeout=4.0, follow_timeout=1.0)
    client = SimpleNamespace(
        simulation_id=SID, rank=0, ranks=1, run_id="run-a", endpoints=["tcp://x:1"],
        tuning=tuning, admission_rejected=Counter(), bye_counts=[STEPS],
    )  # fmt: skip
    rounds = Rounds(client, [{"endpoint": "tcp://x:1", "follow_endpoint": follow}],  # type: ignore[arg-type]
                    f"simulation {SID} rank 0")  # fmt: skip
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("melissa_trainer.client.client")
    logger.addHandler(handler)
    try:
        now = time.monotonic()
        rounds._tell(0, now - 2.0, now + 590.0, False, rendezvous, 1.0, now - 2.0)
    finally:
        logger.removeHandler(handler)
    assert len(said) == 1, said
    return c_words(said[0])


@pytest.mark.timeout(180)
def test_a_c_close_whose_bye_is_not_confirmed_says_once_what_it_waits_for(
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
        follow = json.loads((rendezvous / "rank_0.json").read_text())["follow_endpoint"]
        solver = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        sends = [f"send {t} u 1 4 {t}" for t in range(STEPS)]
        closed = solver.send(f"id {SID}", "field u 1 1 4", "close_timeout 600",
                             "disconnected_timeout 4", "follow_timeout 1", "start", *sends,
                             "close")  # fmt: skip
        wait_until("question at the close", mark.exists)
        receiver.send_signal(signal.SIGKILL)
        assert receiver.wait(30) == -signal.SIGKILL
        lines, err = solver.finish(120)
    finally:
        if solver is not None:
            solver.kill()
        if receiver.poll() is None:
            receiver.kill()
        receiver.wait()
    code, _, message = lines[closed][-1].partition(" ")
    assert int(code) == MT_ETIMEDOUT, (code, message, err)
    assert "its BYE was not confirmed" in message, message  # (the receipt's error)
    notices = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert len(notices) == 1, err  # (before: none)
    notice = notices[0].removeprefix("melissa_trainer: mt_client_close: ")
    assert numbers_aside(notice) == numbers_aside(python_notice(follow, str(rendezvous)))
