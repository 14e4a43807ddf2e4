"""A handshake that libzmq ends because its peer never answered (``ZMQ_HANDSHAKE_IVL``,
30 s by default: a failure without detail) is not a refused key (a user trial: a client
with MELISSA_TRAINER_KEY pointed at ``python -m http.server``, which accepts TCP and
waits for a line, failed after 61 s with "the server key does not match"). Worse, a
receiver whose trainer is stopped (SIGSTOP, a suspended job) is silent too: its close
ended on that ValueError instead of waiting for it to be continued. A failure that may
end a connection `NOT_ZMQ_AFTER` s old is now not counted (`client.handshake`'s module
docstring); a key refused within milliseconds still is, read at once or late.

The rule on fed events (the order and the reads are the test's), then on real sockets:
a silent TCP peer (accepts, never writes) and a real CURVE `Receiver` in a process of
its own that the test stops, each with the client's handshake interval shortened to
`IVL_MS` (`ClientTuning.socket_options`). Each test but the guard failed before."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zmq
from fed_monitor import ENDPOINT, fed
from keys_receiver_process import closing
from silent_peer import silent  # noqa: F401 (a fixture)
from waiting import wait_until

from melissa_trainer.client import ENV_KEY, ENV_RENDEZVOUS, Client, ClientTuning
from melissa_trainer.client.handshake_words import MISMATCH, NOT_RECEIVER, PLAIN

FIELDS = {"u": ((4,), "float32")}
#: the client's handshake interval in the tests on real sockets (above NOT_ZMQ_AFTER)
IVL_MS = 2500
TUNING = {"socket_options": {zmq.HANDSHAKE_IVL: IVL_MS}}
CONNECTION = (zmq.EVENT_CONNECTED, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_DISCONNECTED)


def read_late(
    context: zmq.Context, keyed: bool, connections: int, quiet_for: float, value: int = 0
) -> str | None:
    """What `Handshakes.refused` says when it reads, at once, `connections` connections
    that each failed without detail, `quiet_for` s after the last read of the monitor
    (a send after a computation); with `value`, one that failed with a mechanism
    mismatch of that value instead."""
    events = [(e, 0) for e in CONNECTION * connections]
    if value:
        events = [(zmq.EVENT_CONNECTED, 0), (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, value)]
    return fed(context, keyed, events, quiet_for).refused([ENDPOINT])


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_handshake_timeouts_read_late_are_not_a_refusal(context: zmq.Context, keyed: bool) -> None:
    # three handshake intervals of 30 s, read after 100 s: before, a refused key (keyed)
    # or "ended every ZeroMQ handshake" (keyless)
    assert read_late(context, keyed, 3, 100.0) is None


def test_a_key_refused_at_each_reconnection_read_late_still_is(context: zmq.Context) -> None:
    # (the guard: 10 s of reconnections every 100 ms; at most one per NOT_ZMQ_AFTER let off)
    said = read_late(context, True, 100, 10.0)
    assert said is not None and MISMATCH in said, said


def test_a_key_for_a_plain_receiver_says_unset_it(context: zmq.Context) -> None:
    said = read_late(context, True, 1, 0.0, zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
    refused = f"to {ENDPOINT}: the receiver refused this client's handshake, nothing sent to it "
    assert said == f"{refused}was delivered: {PLAIN}", said  # (before: "does not use CURVE")
    assert PLAIN.startswith("the receiver takes plain (unencrypted) connections and this")
    # the C client's words, its string literals joined (clients/c/src/handshake.c)
    source = (Path(__file__).parents[2] / "clients" / "c" / "src" / "handshake.c").read_text()
    assert PLAIN in re.sub(r'"\s*"', "", source)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_keyed_client_is_told_a_silent_peer_is_not_a_receiver(
    silent: tuple[str, list[socket.socket]],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint, accepted = silent
    monkeypatch.delenv(ENV_RENDEZVOUS, raising=False)
    monkeypatch.setenv(ENV_KEY, zmq.curve_keypair()[0].decode())
    tuning = ClientTuning(close_timeout=5 * IVL_MS / 1000, **TUNING)  # type: ignore[arg-type]
    client = Client(FIELDS, simulation_id=7, endpoints=endpoint, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    thread, failed = closing(client)
    # three handshakes timed out (before, the close raised at the second's end)
    wait_until(lambda: len(accepted) >= 4 or not thread.is_alive(), "4 connections", timeout=30)
    assert thread.is_alive() and not failed, failed
    thread.join(timeout=30)
    assert not thread.is_alive() and len(failed) == 1, failed
    said = str(failed[0])
    assert f"{endpoint}: {NOT_RECEIVER}" in said and MISMATCH not in said, said


RECEIVER = """
import sys
import zmq
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
buffer = FIFOBuffer(64)
config = ReceiverConfig(expected_simulations=1, curve_secret_key=zmq.curve_keypair()[1])
receiver = Receiver(buffer, 0, 1, config)
receiver.start()
try:
    print(receiver.endpoint, receiver.curve_public_key, flush=True)
    while True:
        try:
            batch = buffer.get_batch(16, timeout=0.1)
        except TimeoutError:
            continue
        if not batch:
            break  # (the stream ended)
        for sample in batch:
            print(int(sample["time_step"]), flush=True)
finally:
    receiver.stop()
"""


def connections_to(port: int) -> set[int]:
    """The local ports of this machine's TCP connections to `port` (IPv4, Linux's
    ``/proc/net/tcp``; those a client closed stay listed a while)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote = line.split()[1:3]
        if int(remote.rsplit(":", 1)[1], 16) == port:
            found.add(int(local.rsplit(":", 1)[1], 16))
    return found


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP, /proc/net/tcp")
def test_a_keyed_close_waits_for_a_stopped_curve_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        assert proc.stdout is not None
        endpoint, key = proc.stdout.readline().split()
        os.kill(proc.pid, signal.SIGSTOP)  # (before the client connects: no handshake)
        monkeypatch.delenv(ENV_RENDEZVOUS, raising=False)
        monkeypatch.setenv(ENV_KEY, key)  # (the right key)
        tuning = ClientTuning(close_timeout=None, **TUNING)  # type: ignore[arg-type]
        client = Client(FIELDS, simulation_id=4, endpoints=endpoint, tuning=tuning)
        for t in range(3):
            client.send(t, u=np.full(4, t, np.float32))
        thread, failed = closing(client)
        port = int(endpoint.rsplit(":", 1)[1])
        # three handshakes timed out (before, the close raised at the second's end)
        wait_until(lambda: len(connections_to(port)) >= 4 or not thread.is_alive(), "4 connections")
        assert thread.is_alive() and not failed, failed
        os.kill(proc.pid, signal.SIGCONT)
        thread.join(timeout=60)
        assert not thread.is_alive() and not failed, failed
        out, _ = proc.communicate(timeout=60)
        assert sorted(int(line) for line in out.split()) == [0, 1, 2]
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.communicate(timeout=60)
