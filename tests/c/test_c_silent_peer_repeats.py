"""The C client pointed at a program that accepts TCP and never speaks ZeroMQ (the port
of ``python -m http.server``, any silent listener) said that it is not a receiver once,
at ~2 s (NOT_ZMQ_AFTER_S), then nothing until its close gave up at close_timeout. The
wait must go on (a receiver whose trainer is stopped, SIGSTOP, is as silent), so it says
that it does, as the Python client (tests/client/test_silent_peer_repeats.py), word for
word: again at REPEAT_AFTER_S (15 s) of silence and at each doubling, with how long the
peer has been silent and what ends the wait (clients/c/src/handshake.c warn).

A real silent listener on 127.0.0.1 (`silent_peer`) and the compiled driver; the C
thresholds are compiled in, so the test waits out the first repeat (15 s). Failed
before: one warning only."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from silent_peer import silent_peer

from melissa_trainer.client.handshake_timing import REPEAT_AFTER
from melissa_trainer.client.handshake_words import NOT_RECEIVER  # (the C words: the same)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # (a compiled driver, 15 s waits)

MT_ETIMEDOUT = 8
#: the close's timeout: past the first repeat (REPEAT_AFTER of silence), short of the
#: second (2 x the silence of the first) and of libzmq's handshake timeout (30 s)
CLOSE_TIMEOUT = REPEAT_AFTER + 7


@pytest.mark.timeout(120)
def test_a_c_close_to_a_silent_peer_warns_of_it_again_while_it_waits(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.txt"
    script.write_text(
        f"close_timeout {CLOSE_TIMEOUT}\nfield u 1 1 4\nstart\nsend 0 u 1 4 0\nclose\n"
    )
    with silent_peer() as (endpoint, _accepted):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
        env |= {"MELISSA_TRAINER_ENDPOINTS": endpoint, "MELISSA_TRAINER_SIMULATION_ID": "3"}
        proc = subprocess.run(
            [str(script_exe), str(script)],
            capture_output=True, text=True, timeout=90, env=env, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    close = proc.stdout.splitlines()[-1]
    assert close.startswith(f"5 {MT_ETIMEDOUT} ") and f"{endpoint}: {NOT_RECEIVER}" in close, (
        proc.stdout
    )
    warned = [line for line in proc.stderr.splitlines() if NOT_RECEIVER in line]
    whose = f"melissa_trainer: simulation 3 rank 0: to {endpoint}: "
    # (before: the first only, then silence until the close gave up)
    assert len(warned) == 2, proc.stderr
    assert warned[0] == f"{whose}{NOT_RECEIVER}; nothing sent to it is delivered", warned
    again = re.fullmatch(
        re.escape(whose) + r"still no ZeroMQ handshake (\d+) s after TCP connected: "
        + re.escape(f"{NOT_RECEIVER}; nothing sent to it is delivered")
        + "; waiting on until send_timeout or close_timeout",
        warned[1],
    )  # fmt: skip
    assert again is not None, warned
    assert REPEAT_AFTER <= int(again[1]) < 2 * REPEAT_AFTER, warned
