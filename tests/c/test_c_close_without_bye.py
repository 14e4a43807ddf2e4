"""A C close without BYE (a time step left incomplete: MT_EFIELD, the run did not finish)
waits for no receiver that cannot take what it queued, as the Python client's close
after a failure, ``close(bye=False)`` (tests/client/test_failed_close_first_outcome.py):
a port that refuses (nothing listens), or a peer that accepted TCP and never completes a
ZeroMQ handshake (not a receiver). It returns MT_EFIELD with its own message and, after
it, why what was queued was not delivered, in the Python close's words
(clients/c/src/close_failed.c). A receiver that answers gets what was sent, and the
close says only MT_EFIELD's message (tests/c/test_c_client.py
test_close_with_an_incomplete_step_is_an_error_without_bye).

Before (close_wait.c waited in slices until the close timeout): each close below waited
its whole close timeout (20 s), then returned MT_EFIELD's message alone, nothing said of
the undelivered steps: the loop failed at its first close, the silent peer's likewise.
The refused port is held (`held_ports`): every connect is refused at once,
deterministically; no clock is asserted (the words say why the close ended)."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from held_ports import refused_endpoint
from predict_script import Script
from silent_peer import silent_peer

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EFIELD = 2
INCOMPLETE = (
    "closed with time step 0 incomplete: field(s) 'v' missing; no BYE sent (the run did not finish)"
)
NO_WAIT = "a close after a failure does not wait for a disconnected receiver"
#: far beyond a refusal's report (milliseconds): a close that ends on it is the bug
CLOSE_TIMEOUT = 20


def incomplete_close(exe: Path, endpoint: str) -> list[tuple[int, str]]:
    """The status and message of the close of an mt_script that starts a client of two
    fields for `endpoint`, sends field u of time step 0 (v missing), and closes it."""
    script = Script(exe)
    try:
        last = script.send(
            "id 4", f"endpoints {endpoint}", f"close_timeout {CLOSE_TIMEOUT}",
            "field u 1 1 4", "field v 1 1 4", "start", "send 0 u 1 4 1", "close",
        )  # fmt: skip
        got, _ = script.finish(60)
    finally:
        script.kill()
    code, _, message = got[last][-1].partition(" ")
    return [(int(code), message.strip())]


@pytest.mark.timeout(120)
def test_each_close_without_bye_to_a_refusing_port_is_at_once(
    script_exe: Path,  # noqa: F811
) -> None:
    """Create-then-close in a loop, as the Python test does: each close ends on the
    refusal, never on its close timeout."""
    endpoint = refused_endpoint()
    for attempt in range(10):
        [(code, message)] = incomplete_close(script_exe, endpoint)
        assert code == MT_EFIELD, (attempt, message)
        assert message.startswith(
            f"{INCOMPLETE}; and simulation 4 rank 0: queued messages not delivered to "
            f"{endpoint}: the receiver is unreachable, tried for "
        ), (attempt, message)
        assert message.endswith(
            f"({NO_WAIT}): no receiver ever accepted a connection at {endpoint}: check the "
            "endpoint (the trainer's rank_N.json) or start the trainer first"
        ), (attempt, message)
        assert "close_timeout" not in message, (attempt, message)


@pytest.mark.timeout(120)
def test_a_close_without_bye_does_not_wait_for_a_peer_that_is_not_a_receiver(
    script_exe: Path,  # noqa: F811
) -> None:
    """TCP accepted, no ZeroMQ handshake ever: not a receiver once NOT_ZMQ_AFTER_S (2 s)
    passed; the close says so instead of waiting its close timeout."""
    with silent_peer() as (endpoint, _):
        [(code, message)] = incomplete_close(script_exe, endpoint)
    assert code == MT_EFIELD, message
    assert message.startswith(
        f"{INCOMPLETE}; and simulation 4 rank 0: queued messages not delivered to "
        f"{endpoint}: not a melissa-trainer receiver (it accepted a TCP connection but no "
        "ZeroMQ handshake completed)"
    ), message
    assert message.endswith("; a close after a failure does not wait for it"), message
