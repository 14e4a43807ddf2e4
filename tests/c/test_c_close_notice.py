"""A C solver's close waiting on a receiver it cannot reach says so once on stderr, as
the Python close's warning does (clients/c/src/close_wait.c `tell`; closing.py
waiting_notice; tests/client/test_close_trainer_gone.py): what it waits for, how long in
all and the setters that shorten it, then nothing until the close ends.

Before the change the C close was silent for the whole wait (a user trial of the Python
client, htrial12 finding 2: 181 s without a word). The trainer here is dead before the
solver starts (test_c_close_dead_trainer.py's setup): the notice names the endpoint no
receiver ever accepted a connection at."""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import (
    Script,
    zctx,  # noqa: F401 (a fixture)
)
from test_c_close_dead_trainer import MT_ETIMEDOUT, close_to_dead
from test_c_close_receipt import publish
from test_c_follow_resend_gone import dead_endpoint

from melissa_trainer.client.handshake_words import NOT_RECEIVER  # (the C words: the same)

pytestmark = pytest.mark.e2e  # every test here starts a process

PREFIX = "melissa_trainer: mt_client_close: simulation 3 rank 0: closing, "


@pytest.mark.timeout(120)
@pytest.mark.parametrize("window", [False, True], ids=["no-window", "window"])
def test_a_close_to_a_dead_trainer_says_once_what_it_waits_for(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    window: bool,
) -> None:
    dead = dead_endpoint(zctx)
    setup = ("disconnected_timeout 1", "follow_timeout 0.5")
    setup += () if window else ("replay_bytes 0",)
    code, message, err = close_to_dead(script_exe, tmp_path / "rv", dead, setup)
    assert code == MT_ETIMEDOUT, (message, err)
    notices = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert len(notices) == 1, err
    notice = notices[0]
    assert f"no receiver ever accepted a connection at {dead}" in notice, notice
    assert "(mt_set_disconnected_timeout=1.0 s)" in notice, notice
    # (the words of Python's waits_for, as the receipt notice's: one C implementation,
    # close_notice.c mt_waits_for; before, close_wait.c's own had no final period and no
    # "(at once if it publishes sooner)")
    assert notice.endswith("nothing more is said until the close ends."), notice
    if window:
        assert "(mt_set_follow_timeout=0.5 s) for a restarted trainer to publish in" in notice
        assert "and follows it (at once if it publishes sooner): up to " in notice, notice
        assert "mt_set_disconnected_timeout and mt_set_follow_timeout shorten it" in notice
    else:
        assert "follow_timeout" not in notice, notice
        assert "mt_set_disconnected_timeout shortens it" in notice, notice


@pytest.mark.timeout(120)
def test_a_close_to_an_endpoint_never_connected_says_no_died_nor_reconnect(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A user trial (htrial14, tcp://127.0.0.1:1): the notice waited "for it to
    reconnect" and the error said "the trainer died, or its node", though no connection
    was ever made. Now only the never-connected story."""
    dead = dead_endpoint(zctx)
    setup = ("disconnected_timeout 1", "replay_bytes 0")
    code, message, err = close_to_dead(script_exe, tmp_path / "rv", dead, setup)
    assert code == MT_ETIMEDOUT, (message, err)
    notices = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert len(notices) == 1 and "for it to connect (" in notices[0], err
    assert f"to {dead}: the receiver is unreachable, tried for " in message, message
    assert message.endswith(
        f"no receiver ever accepted a connection at {dead}: check the endpoint (the "
        "trainer's rank_N.json) or start the trainer first"
    ), message
    for said in (notices[0], message):
        assert "died" not in said and "reconnect" not in said and "run it again" not in said


#: what the solver computes after its last send, its trainer killed meanwhile: the time
#: nothing reads the monitor (the scenario, not a synchronisation)
COMPUTE = 4.0


@pytest.mark.timeout(120)
def test_a_close_after_a_kill_dates_the_disconnection_and_adds_up(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A user trial (htrial14, kill_client2.sh): "disconnected since 07:49:45 (16 s)...
    waits up to 2 s more (disconnected_timeout=5 s)", then "disconnected for 18 s": the
    time was when the close first read the monitor, and the numbers did not add up. Now
    the disconnection is dated back by ZeroMQ's reconnection intervals, and the notice
    says how much of it the close counts: "(N s, M s of them in this wait...) ... up to
    L s more (...=2.0 s)", M + L = 2, N at least COMPUTE more than M."""
    pull = zctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    endpoint = str(pull.getsockopt_string(zmq.LAST_ENDPOINT))
    rendezvous = tmp_path / "rv"
    publish(rendezvous, endpoint, "tcp://127.0.0.1:1")
    script = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
    try:
        setup = ("close_timeout 600", "disconnected_timeout 2", "replay_bytes 0")
        sent = script.send("id 3", "field u 1 1 4", *setup, "start", "send 0 u 1 4 0")
        assert script.wait(sent)[-1].split(" ", 1)[0] == "0", script.seen
        assert pull.poll(30_000), "the solver's step never came"  # (connected)
        pull.close(linger=0)  # (the trainer killed: its connection reset)
        threading.Event().wait(COMPUTE)  # (the solver computes: nothing reads the monitor)
        closed = script.send("close")
        lines, err = script.finish(120)
    finally:
        script.kill()
        if not pull.closed:
            pull.close(linger=0)
    code, _, message = lines[closed][-1].partition(" ")
    assert int(code) == MT_ETIMEDOUT, (message, err)
    notices = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert len(notices) == 1, err
    found = re.search(
        r"\((\d+) s, (\d+) s of them in this wait: .* waits up to (\d+) s more for it to "
        r"reconnect \(mt_set_disconnected_timeout=2\.0 s\)",
        notices[0],
    )
    assert found, notices[0]
    total, counted, left = (int(g) for g in found.groups())
    assert total >= counted + COMPUTE / 2 and abs(counted + left - 2) <= 1, notices[0]
    found = re.search(
        r"disconnected for (\d+) s without a new connection \(mt_set_disconnected_timeout=2\.0 "
        r"s, counted from this close's start (\d+) s ago;",
        message,
    )
    assert found and int(found[1]) >= int(found[2]) + COMPUTE / 2, message


@pytest.mark.timeout(120)
def test_a_close_to_another_program_says_it_is_not_a_receiver(
    script_exe: Path,  # noqa: F811
) -> None:
    """A user trial (htrial14: ``python -m http.server``, the client at its port): TCP
    connects, no ZeroMQ handshake ever completes, and the close said nothing until its
    timeout. Now a warning once (when a read of the monitor finds it 2 s connected with
    no handshake) and the close's error name it (clients/c/src/handshake.c), as the
    Python client (tests/client/test_not_a_receiver.py)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        script = Script(script_exe)
        try:
            setup = (f"endpoints {endpoint}", "close_timeout 3", "replay_bytes 0")
            sent = script.send("id 3", *setup, "field u 1 1 4", "start", "send 0 u 1 4 0")
            assert script.wait(sent)[-1].split(" ", 1)[0] == "0", script.seen
            listener.settimeout(30)
            accepted, _ = listener.accept()  # (TCP connected: the close comes after)
            with accepted:
                closed = script.send("close")
                lines, err = script.finish(120)
        finally:
            script.kill()
    code, _, message = lines[closed][-1].partition(" ")
    assert int(code) == MT_ETIMEDOUT, (message, err)
    assert message.endswith(f"{endpoint}: {NOT_RECEIVER}"), message
    warned = [line for line in err.splitlines() if NOT_RECEIVER in line]
    assert warned == [
        f"melissa_trainer: simulation 3 rank 0: to {endpoint}: {NOT_RECEIVER}; nothing sent "
        "to it is delivered"
    ], err
