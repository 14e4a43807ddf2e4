"""A C send blocked on a receiver that is not there says so once on stderr while it
waits, in the Python client's words (send_wait.py SendWait._tell, closing.py
waiting_notice: "sending time step N, ..."; clients/c/src/send_notice.c), the C setters
named (tests/close_words.py `c_words`), before it gives up: compared here, the clock and
the figures aside. Before, the C send said nothing until it gave up (the disconnected
timeout, then the follow timeout: a minute or more by default).

The receiver is never there (nothing listens at the endpoint): the queue (sndhwm 1,
unbatched) fills at once and the send blocks; it waits out the disconnected timeout
(the notice at half of it), or the send timeout when that ends first. A close waiting
there says its notice in Python's words too (close_wait.c tell)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from close_words import c_words
from compiled import c_client  # noqa: F401 (a fixture)

from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.e2e  # every test here starts a process

OK = "tcp://127.0.0.1:9"  # (nothing listens)
LOGGER = "melissa_trainer.client.client"
STEPS = 40
#: (name, disconnected timeout, send timeout; None: no bound)
CASES = [
    ("disconnected-timeout-ends-it", 1.0, None),
    ("send-timeout-ends-it", 4.0, 2.5),
]


def masked(text: str) -> str:
    """`text` without what differs from run to run: the clock, the figures."""
    text = re.sub(r"\d\d:\d\d:\d\d", "HH:MM:SS", text)
    return re.sub(r"\b\d+(\.\d+)?\b", "#", text)


def python_notices(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    disconnected: float,
    send_timeout: float | None,
) -> list[str]:
    """The blocked-send notices of a Python `Client` sending until it gives up."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MELISSA_TRAINER_SIMULATION_ID", "3")
    monkeypatch.setenv("MELISSA_TRAINER_ENDPOINTS", OK)
    tuning = ClientTuning(
        disconnected_timeout=disconnected, sndhwm=1, batch_bytes=0, failed_close_timeout=0
    )
    client = Client({"u": ((4,), "float32")}, tuning=tuning, send_timeout=send_timeout)
    try:
        with (
            caplog.at_level(logging.WARNING, logger=LOGGER),
            pytest.raises(
                TimeoutError, match="no receiver ever accepted a connection at tcp://127.0.0.1:9"
            ),
        ):
            for t in range(STEPS):
                client.send(t, u=np.full(4, t, np.float32))
    finally:
        client.close(bye=False)
    return [r.getMessage() for r in caplog.records if ": sending " in r.getMessage()]


def c_notices(exe: Path, tmp_path: Path, disconnected: float, send_timeout: float | None) -> str:
    """The stderr of an mt_script sending as the Python client does."""
    lines = ["id 3", f"endpoints {OK}", "field u 1 1 4", "sndhwm 1", "batching 0 1",
             "replay_bytes 0", f"disconnected_timeout {disconnected}"]  # fmt: skip
    if send_timeout is not None:
        lines.append(f"send_timeout {send_timeout}")
    lines += ["start", *(f"send {t} u 1 4 {t}" for t in range(STEPS)), "abort"]
    script = tmp_path / "script.txt"
    script.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [str(exe), str(script)], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^\d+ 8 simulation 3 rank 0: could not send", proc.stdout, re.M), proc.stdout
    return proc.stderr


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("disconnected", "send_timeout"),
    [(d, s) for _, d, s in CASES],
    ids=[n for n, _, _ in CASES],
)
def test_a_blocked_send_says_what_it_waits_for_as_pythons(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    disconnected: float,
    send_timeout: float | None,
) -> None:
    python = python_notices(monkeypatch, caplog, disconnected, send_timeout)
    assert len(python) == 1, python
    err = c_notices(script_exe, tmp_path, disconnected, send_timeout)
    said = [line for line in err.splitlines() if ": sending " in line]
    assert len(said) == 1, err  # (once: not a line per slice)
    assert said[0].startswith("melissa_trainer: simulation 3 rank 0: sending time step "), said
    c = said[0].removeprefix("melissa_trainer: ")
    assert masked(c) == masked(c_words(python[0])), (c, python[0])
    bound = f"mt_set_send_timeout={send_timeout} s" if send_timeout else "mt_set_disconnected_t"
    assert f"for it to connect ({bound}" in c, c


@pytest.mark.timeout(90)
def test_a_close_to_no_receiver_says_it_as_pythons(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The close's notice (close_wait.c tell), the same story: C said "at E: check the
    endpoint (...) or start the trainer first (tried since HH:MM:SS)." where Python says
    "at E (tried since HH:MM:SS): check the endpoint (...) or start the trainer first."
    (and "M s of them in this close" where Python says "in this wait")."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MELISSA_TRAINER_SIMULATION_ID", "3")
    monkeypatch.setenv("MELISSA_TRAINER_ENDPOINTS", OK)
    tuning = ClientTuning(disconnected_timeout=1.0, batch_bytes=0)
    client = Client({"u": ((4,), "float32")}, tuning=tuning)
    client.send(0, u=np.zeros(4, np.float32))
    with (
        caplog.at_level(logging.WARNING, logger=LOGGER),
        pytest.raises(
            TimeoutError, match="no receiver ever accepted a connection at tcp://127.0.0.1:9"
        ),
    ):
        client.close()
    python = [r.getMessage() for r in caplog.records if ": closing, " in r.getMessage()]
    assert len(python) == 1, python
    script = tmp_path / "script.txt"
    script.write_text(
        f"id 3\nendpoints {OK}\nfield u 1 1 4\nbatching 0 1\nreplay_bytes 0\n"
        "disconnected_timeout 1\nstart\nsend 0 u 1 4 0\nclose\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [str(script_exe), str(script)], capture_output=True, text=True, timeout=60, env=env
    )
    prefix = "melissa_trainer: mt_client_close: "
    c = [line.removeprefix(prefix) for line in proc.stderr.splitlines() if ": closing, " in line]
    assert [masked(said) for said in c] == [masked(c_words(python[0]))], (c, python)
