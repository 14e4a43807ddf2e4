"""A C close to a peer that accepted TCP and then went, never having completed a ZeroMQ
handshake: killed (-9) after it accepted the client's connection, or a listener that
closes each connection it accepts. No close hangs, none waits its close timeout (30 s
here), each says why (the words of the Python client's close, which were its words too
for these four peers when this test was written; not re-checked here):

* killed, a close with BYE: MT_ETIMEDOUT once the peer was disconnected for the
  disconnected timeout (4 s), "the receiver is unreachable, disconnected for 4 s without a
  new connection (mt_set_disconnected_timeout=4.0 s; ...)";
* killed, a close without BYE (a time step incomplete): MT_EFIELD, and at once that the
  close after a failure does not wait for a disconnected receiver;
* a listener closing each connection, with BYE: MT_EENV, not a receiver ("ended every
  ZeroMQ handshake without completing one"), and nothing delivered;
* the same without BYE: MT_EFIELD at once, naming the endpoint.

The peer is a real process (`PEER`): it prints its port, then "accepted" for each
connection; the client's connection is accepted before the peer is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import MT_EFIELD, MT_ETIMEDOUT, Script

from melissa_trainer.client.handshake_notes import CUT_BEFORE_HANDSHAKE

pytestmark = pytest.mark.e2e  # every test here starts processes; one waits 4 s

MT_EENV = 6
SID = 5
#: the peer: argv[1] "keep" holds each connection it accepts, "close" closes it at once
PEER = r"""
import socket, sys
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print(listener.getsockname()[1], flush=True)
held = []
while True:
    conn = listener.accept()[0]
    print("accepted", flush=True)
    if sys.argv[1] == "keep":
        held.append(conn)
    else:
        conn.close()
"""
#: why a peer that never completed a handshake went (handshake_notes.CUT_BEFORE_HANDSHAKE,
#: as the Python client says it); before, both killed-peer closes said "the trainer died,
#: or its node", though no trainer had ever spoken there
CUT = CUT_BEFORE_HANDSHAKE
INCOMPLETE = (
    "closed with time step 1 incomplete: field(s) 'v' missing; no BYE sent (the run did not "
    "finish); and "
)


def close_to_peer(exe: Path, how: str, bye: bool, accepts: int = 1) -> tuple[str, int, str]:
    """The peer's endpoint, and the status and message of the close of a client of fields
    u and v that sent time step 0 and u of step 1 (and v, with `bye`) to a peer that
    `how` ("kill": killed -9 once it accepted; "close": closes each connection), once the
    peer accepted `accepts` connections (each before the last ended before it was tried:
    its end is in the client's monitor queue when the close reads it)."""
    peer = subprocess.Popen(
        [sys.executable, "-c", PEER, "keep" if how == "kill" else "close"],
        stdout=subprocess.PIPE,
        text=True,
    )
    script = Script(exe)
    try:
        assert peer.stdout is not None
        endpoint = f"tcp://127.0.0.1:{int(peer.stdout.readline())}"
        sends = ["send 0 u 1 4 1", "send 0 v 1 4 1", "send 1 u 1 4 1"]
        last = script.send(
            f"id {SID}", f"endpoints {endpoint}", "close_timeout 30", "disconnected_timeout 4",
            "field u 1 1 4", "field v 1 1 4", "start", *sends, *(["send 1 v 1 4 1"] if bye else []),
        )  # fmt: skip
        assert script.wait(last)[-1].strip() == "0", script.seen[last]
        for _ in range(accepts):  # (the client's connection, and its reconnections)
            assert peer.stdout.readline().strip() == "accepted"
        if how == "kill":
            peer.send_signal(signal.SIGKILL)
            peer.wait()
        done = script.send("close")
        code, _, message = script.wait(done)[-1].partition(" ")
        script.finish(30)
    finally:
        script.kill()
        peer.kill()
        peer.wait()
        if peer.stdout is not None:
            peer.stdout.close()
    return endpoint, int(code), message.strip()


@pytest.mark.timeout(120)
def test_a_close_with_bye_to_a_killed_peer_ends_at_the_disconnected_timeout(
    script_exe: Path,  # noqa: F811
) -> None:
    endpoint, code, message = close_to_peer(script_exe, "kill", True)
    assert code == MT_ETIMEDOUT, message
    assert message.startswith(
        f"simulation {SID} rank 0: queued messages not delivered to {endpoint}: the receiver "
        "is unreachable, disconnected for "
    ), message
    assert (
        f" s without a new connection (mt_set_disconnected_timeout=4.0 s; {CUT}). What it sent "
        "after the trainer's last checkpoint may be lost" in message
    ), message


@pytest.mark.timeout(120)
def test_a_close_without_bye_to_a_killed_peer_is_at_once(script_exe: Path) -> None:  # noqa: F811
    endpoint, code, message = close_to_peer(script_exe, "kill", False)
    assert code == MT_EFIELD, message
    assert message.startswith(
        f"{INCOMPLETE}simulation {SID} rank 0: queued messages not delivered to {endpoint}: "
        "the receiver is unreachable, disconnected for "
    ), message
    assert message.endswith(
        " s without a new connection (a close after a failure does not wait for a "
        f"disconnected receiver; {CUT})"
    ), message


@pytest.mark.timeout(120)
def test_a_close_with_bye_to_a_peer_closing_each_connection_says_not_a_receiver(
    script_exe: Path,  # noqa: F811
) -> None:
    endpoint, code, message = close_to_peer(script_exe, "close", True)
    assert code == MT_EENV, message
    assert message.startswith(
        f"simulation {SID} rank 0: to {endpoint}: not a melissa-trainer receiver, or a "
        "receiver that takes CURVE (encrypted) connections only (it accepted TCP "
        "connections but ended every ZeroMQ handshake without completing one)"
    ), message
    assert message.endswith("; nothing sent to it was delivered"), message


@pytest.mark.timeout(120)
def test_a_close_without_bye_to_a_peer_closing_each_connection_is_at_once(
    script_exe: Path,  # noqa: F811
) -> None:
    endpoint, code, message = close_to_peer(script_exe, "close", False)
    assert code == MT_EFIELD, message
    assert message.startswith(
        f"{INCOMPLETE}simulation {SID} rank 0: queued messages not delivered to {endpoint}: "
    ), message
    assert "close_timeout" not in message, message  # (not its bound: it did not wait)


@pytest.mark.timeout(120)
def test_a_close_without_bye_to_a_peer_closing_each_of_its_connections_says_not_a_receiver(
    script_exe: Path,  # noqa: F811
) -> None:
    """Failed before: once the peer had ended two connections, the close said "the
    receiver is unreachable, disconnected for 0 s without a new connection (...; the
    trainer died, or its node)"; the close with BYE said not a receiver (above)."""
    endpoint, code, message = close_to_peer(script_exe, "close", False, accepts=3)
    assert code == MT_EFIELD, message
    assert message.startswith(
        f"{INCOMPLETE}simulation {SID} rank 0: to {endpoint}: not a melissa-trainer receiver, "
        "or a receiver that takes CURVE (encrypted) connections only (it accepted TCP "
        "connections but ended every ZeroMQ handshake without completing one)"
    ), message
    assert "died" not in message, message
