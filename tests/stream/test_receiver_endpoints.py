"""The stream receiver's endpoints: its rendezvous file is published, a CurveZMQ server
accepts only clients with its public key, abandon messages reach receivers with keys of
their own, and a port in use names the fix.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq
from helpers import drain, running
from receiver_runs import U, check_stream, data, pushes, send, tel, value
from waiting import UNTIL_TEST_TIMEOUT, wait_until
from zmq.utils.monitor import recv_monitor_message

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


@contextmanager
def monitored_push(endpoint: str, events: int) -> Iterator[tuple[zmq.Socket, zmq.Socket]]:
    """A PUSH socket without a key and its monitor (`events`), attached before it
    connects to `endpoint`, so that none of its connection's events is missed."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    monitor = sock.get_monitor_socket(events)
    sock.connect(endpoint)
    try:
        yield sock, monitor
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        ctx.term()


#: the monitor events that end a client's handshake, one way or the other
_HANDSHAKE_ENDS = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_DISCONNECTED
)


@pytest.mark.timeout(30)
def test_rendezvous_file_is_published(tmp_path: Path) -> None:
    with running(rank=1, world_size=2, rendezvous_dir=tmp_path / "rdv") as rec:
        info = json.loads((tmp_path / "rdv" / "rank_1.json").read_text())
        assert info.pop("follow_endpoint").startswith("tcp://")  # (`follow_server`)
        assert info.pop("follow_kinds") == [9, 11, 13]  # (the queries it answers)
        assert info.pop("routing") == "simulation_step"  # ((s + t) % W: protocol section 2)
        assert info.pop("host") == socket.gethostname()  # (and who reaches a loopback:
        info.pop("loopback_scope", None)  # `host_scope`, test_host_scope.py)
        assert info.pop("pid") == os.getpid()  # (the receiver's process: `trainer_process`,
        info.pop("pid_start"), info.pop("pid_scope")  # test_rendezvous_killed_trainer.py)
        assert info == {"version": 1, "rank": 1, "world_size": 2, "endpoint": rec.endpoint}
        assert list((tmp_path / "rdv").iterdir()) == [tmp_path / "rdv" / "rank_1.json"]
    assert (tmp_path / "rdv" / "rank_1.json").exists()  # left for the next run to overwrite


@pytest.mark.timeout(30)
@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_curve_server_accepts_only_clients_with_its_public_key(tmp_path: Path) -> None:
    public, secret = zmq.curve_keypair()
    buf = FIFOBuffer(10)
    with running(
        buf, curve_secret_key=secret, rendezvous_dir=tmp_path, expected_simulations=1
    ) as rec:
        assert rec.curve_public_key == public.decode()
        assert json.loads((tmp_path / "rank_0.json").read_text())["curve_public_key"] == (
            public.decode()
        )
        client_public, client_secret = zmq.curve_keypair()
        with (
            monitored_push(rec.endpoint, _HANDSHAKE_ENDS) as (plain, monitor),
            pushes(  # the server's public key: accepted
                rec.endpoint,
                curve_serverkey=public,
                curve_publickey=client_public,
                curve_secretkey=client_secret,
            ) as (s,),
        ):
            # The plain one (no key) fails its handshake; once it has, its PUSH has no pipe
            # and a blocking send would wait forever (seen on a loaded machine, where the
            # I/O thread failed the handshake before this thread sent): wait for that
            # failure (its monitor attached before it connected: no event missed), so
            # that the order is always that one, and send without blocking.
            assert monitor.poll(20_000), "the plain client's handshake never ended"
            event = recv_monitor_message(monitor)["event"]
            assert event != zmq.EVENT_HANDSHAKE_SUCCEEDED, "a plain client was let in"
            with contextlib.suppress(zmq.Again):  # (no pipe: nothing to queue it on)
                plain.send_multipart([P.encode_hello(1, 0, 1, [U])], flags=zmq.DONTWAIT)
            send(s, [P.encode_hello(1, 0, 1, [U])])
            send(s, data(1, 0, U, value(1, 0, U)))
            send(s, [P.encode_bye(1, 0, 1, 1)])
            samples = drain(buf)
            # the keyed client's three messages, sent after the plain one, were served:
            # the plain one, still connected, never arrived
            assert tel(rec, "messages") == 3
    check_stream(samples, {1: (range(1), [U], {})})


@pytest.mark.timeout(30)
def test_abandon_reaches_receivers_with_keys_of_their_own(tmp_path: Path) -> None:
    """Two ranks with different CURVE keys (two nodes, each its own secret): ABANDON
    goes to each with its own key, as each publishes it in the rendezvous (with rank
    0's key for both, rank 1 would never hear it: its handshake fails, silently)."""
    from melissa_trainer.stream.control import send_abandon
    from melissa_trainer.stream.endpoints import fetch_rendezvous

    secrets = [zmq.curve_keypair()[1].decode() for _ in range(2)]
    config = dict(expected_simulations=2, rendezvous_dir=tmp_path, bind="tcp://127.0.0.1:*")
    with (
        running(FIFOBuffer(10), 0, 2, curve_secret_key=secrets[0], **config) as r0,
        running(FIFOBuffer(10), 1, 2, curve_secret_key=secrets[1], **config) as r1,
    ):
        entries = fetch_rendezvous(tmp_path, timeout=5.0)
        keys = [e["curve_public_key"] for e in entries]
        assert keys == [r0.curve_public_key, r1.curve_public_key] and keys[0] != keys[1]
        endpoints = [e["endpoint"] for e in entries]
        send_abandon(endpoints, 4, curve_public_key=keys, timeout=5.0)
        wait_until(
            lambda: tel(r0, "simulations_abandoned") == 1, "the condition", UNTIL_TEST_TIMEOUT
        )
        wait_until(
            lambda: tel(r1, "simulations_abandoned") == 1, "the condition", UNTIL_TEST_TIMEOUT
        )
        with pytest.raises(ValueError, match="1 CURVE key for 2 endpoints"):
            send_abandon(endpoints, 5, curve_public_key=keys[:1])


@pytest.mark.timeout(30)
def test_a_port_in_use_names_the_fix() -> None:
    taken = zmq.Context.instance().socket(zmq.PULL)
    try:
        port = taken.bind_to_random_port("tcp://127.0.0.1")
        rec = Receiver(FIFOBuffer(4), config=ReceiverConfig(bind=f"tcp://127.0.0.1:{port}"))
        with pytest.raises(OSError) as info:
            rec.start()
        rec.stop()
    finally:
        taken.close(linger=0)
    text = str(info.value)
    assert info.value.errno == errno.EADDRINUSE
    assert f"cannot bind tcp://127.0.0.1:{port}" in text and f"sport = :{port}" in text
    assert "choose a free port in ReceiverConfig(bind=...)" in text and "port *" in text
