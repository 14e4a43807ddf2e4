"""A C solver streaming to an endpoint where no receiver ever accepted a connection (a
wrong port, a trainer not started): its close and a blocked send say so, with what to
check (clients/c/src/handshake.c mt_handshake_never), besides what they said before. A
user trial (htrial10) found the close saying only "queued messages not delivered within
close_timeout=60.0 s to ['tcp://127.0.0.1:1']", a minute later, nothing about the
endpoint. Before the change the note was in no message here (each test failed).

A receiver that accepted the connection is not said to be one never connected. Nothing
listens on `dead_endpoint` (a port bound and held, `held_ports`): every connection is refused at
once, deterministically."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from test_c_follow_resend_gone import dead_endpoint

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8


def never(endpoint: str) -> str:
    return (
        f"no receiver ever accepted a connection at {endpoint}: check the endpoint (the "
        "trainer's rank_N.json) or start the trainer first"
    )


def run(exe: Path, *lines: str) -> tuple[int, str]:
    """The status and message of the last of `lines` (mt_script commands)."""
    script = Script(exe)
    try:
        last = script.send(*lines)
        got, _ = script.finish(60)
    finally:
        script.kill()
    code, _, message = got[last][-1].partition(" ")
    return int(code), message.strip()


@pytest.mark.timeout(60)
def test_the_close_says_no_receiver_ever_accepted_a_connection(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
) -> None:
    dead = dead_endpoint(zctx)
    code, message = run(
        script_exe, "id 2", f"endpoints {dead}", "close_timeout 0.5", "field u 1 1 4",
        "start", "send 0 u 1 4 0", "close",
    )  # fmt: skip
    assert code == MT_ETIMEDOUT, message
    assert message == (
        "simulation 2 rank 0: queued messages not delivered within close_timeout=0.5 s to "
        f"['{dead}']: {never(dead)}"
    )


@pytest.mark.timeout(60)
def test_the_close_after_the_disconnected_timeout_says_it_too(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
) -> None:
    dead = dead_endpoint(zctx)
    code, message = run(
        script_exe, "id 2", f"endpoints {dead}", "close_timeout 60", "replay_bytes 0",
        "disconnected_timeout 0.2", "field u 1 1 4", "start", "send 0 u 1 4 0", "close",
    )  # fmt: skip
    assert code == MT_ETIMEDOUT, message
    assert "the receiver is unreachable, tried for " in message, message
    assert message.endswith(f"(mt_set_disconnected_timeout=0.2 s): {never(dead)}"), message
    assert "died" not in message and "reconnect" not in message, message


@pytest.mark.timeout(60)
def test_a_blocked_send_says_it(script_exe: Path) -> None:  # noqa: F811
    """A large array (sent without a copy) waits for ZeroMQ to let go of it: never. The
    port is held, bound and not listening (connections refused): a port closed may be
    taken by another program meanwhile on a busy machine, which then accepts."""
    count = 262144
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    dead = f"tcp://127.0.0.1:{held.getsockname()[1]}"
    script = Script(script_exe)
    try:
        first = script.send(
            "id 2", f"endpoints {dead}", "replay_bytes 0", "disconnected_timeout 0.2",
            "sndhwm 1", f"field u 1 1 {count}", "start",
        )  # fmt: skip
        assert script.wait(first)[-1].strip() == "0", script.seen
        sends = [script.send(f"send {t} u 1 {count} {t}") for t in range(4)]
        script.send("abort")
        got, _ = script.finish(60)
    finally:
        script.kill()
        held.close()
    failed = [got[n][-1] for n in sends if got[n][-1].split(" ", 1)[0] != "0"]
    assert failed, "every send went through"
    code_text, _, message = failed[0].partition(" ")
    assert int(code_text) == MT_ETIMEDOUT, message
    assert message.startswith("simulation 2 rank 0: could not send time step "), message
    assert "the receiver is unreachable, tried for " in message, message
    assert f"(mt_set_disconnected_timeout=0.2 s): {never(dead)}. A send waits" in message, message
    assert "died" not in message, message  # (nothing died: before, it said the trainer had)


@pytest.mark.timeout(60)
def test_a_receiver_that_accepted_the_connection_is_not_said_never_connected(
    script_exe: Path,  # noqa: F811
) -> None:
    """A TCP listener that accepts the connection and never speaks ZeroMQ (the handshake
    never completes: nothing is delivered, deterministically)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        script = Script(script_exe)
        try:
            started = script.send(
                "id 2", f"endpoints {endpoint}", "close_timeout 0.5", "replay_bytes 0",
                "field u 1 1 4", "start", "send 0 u 1 4 0",
            )  # fmt: skip
            assert script.wait(started)[-1].strip() == "0", script.seen
            listener.settimeout(30)
            accepted, _ = listener.accept()  # (the client connected)
            with accepted:
                closed = script.send("close")
                got, _ = script.finish(60)
        finally:
            script.kill()
    code, _, message = got[closed][-1].partition(" ")
    assert int(code) == MT_ETIMEDOUT, message
    assert message == (
        "simulation 2 rank 0: queued messages not delivered within close_timeout=0.5 s to "
        f"['{endpoint}']"
    )
