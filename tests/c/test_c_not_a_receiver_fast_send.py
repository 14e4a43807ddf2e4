"""A C solver sending fast into a program that is not a receiver (TCP accepted, no
ZeroMQ handshake: an HTTP server's port), no send blocking, is warned of it while it
sends: `mt_send` reads the sockets' monitors at most every HANDSHAKE_CHECK_S (0.05 s) at
a step's opening (clients/c/src/send.c, handshake.c read_events), and says it on
stderr after NOT_ZMQ_AFTER_S (2 s) without a handshake (again at 15 s and each doubling:
tests/c/test_c_silent_peer_repeats.py), as the Python client now does
(tests/client/test_not_a_receiver_fast_send.py). A guard of what the C client did
already (this passed before that change): the solver sends until stderr says it."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_admission_watch import FLOAT32, solver

from melissa_trainer.client.handshake_words import NOT_RECEIVER  # (the C words: the same)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: seconds of sends the solver gets to be warned (2 s without a handshake, then a look)
BOUND = 30.0
CHECK_EVERY = 200  # sends between two reads of the solver's stderr


def test_a_c_solver_sending_fast_into_a_program_that_is_not_a_receiver_is_warned(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # (the kernel accepts into the backlog: nothing speaks)
        endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        env = {"MELISSA_TRAINER_ENDPOINTS": endpoint}
        stderr = tmp_path / "stderr_4.txt"
        with solver(script_exe, tmp_path, 4, "u", **env) as s:
            t, deadline, said = 0, time.monotonic() + BOUND, ""
            while NOT_RECEIVER not in said and time.monotonic() < deadline:
                for _ in range(CHECK_EVERY):
                    assert s.do(f"send {t} u {FLOAT32} 4 {t}") == (0, ""), t
                    t += 1
                said = stderr.read_text()
            s.do("abort")
    warned = [line for line in said.splitlines() if NOT_RECEIVER in line]
    assert warned == [
        f"melissa_trainer: simulation 4 rank 0: to {endpoint}: {NOT_RECEIVER}; nothing sent "
        "to it is delivered"
    ], (t, said)
