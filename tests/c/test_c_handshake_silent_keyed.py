"""The C client with a CURVE key, pointed at a peer that accepts TCP and never answers
(``python -m http.server`` waits for a line the ZeroMQ greeting never sends): libzmq
ends each such handshake after ``ZMQ_HANDSHAKE_IVL`` (30 s) with a failure without
detail, and clients/c/src/handshake.c counted two of them as a refused key (MT_EENV, "the
server key does not match"), a wrong diagnosis that also ended the close to a receiver
whose trainer is stopped (SIGSTOP) instead of waiting for it. A failure that may end a
connection NOT_ZMQ_AFTER_S old is not counted now, as in the Python client
(tests/client/test_handshake_silent_keyed.py): the close waits out its close_timeout and
says the peer is not a receiver unless a stopped trainer (`NOT_RECEIVER`).

A shim preloaded into the driver (LD_PRELOAD) sets ZMQ_HANDSHAKE_IVL to `IVL_MS` on each
socket before it connects over TCP (the C client has no setter for it); nothing else
changes. Failed before the change (MT_EENV at the second timeout)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import zmq
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import CClient, c_client, preload_shim  # noqa: F401 (a fixture)
from handshake_shim import shim_source
from silent_peer import silent  # noqa: F401 (a fixture)

from melissa_trainer.client.handshake_words import MISMATCH, NOT_RECEIVER

pytestmark = [
    pytest.mark.e2e,  # a compiled driver, and seconds of handshake intervals
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_ETIMEDOUT = 8
IVL_MS = 2500


@pytest.fixture(scope="module")
def short_handshake(tmp_path_factory: pytest.TempPathFactory, c_client: CClient) -> str:  # noqa: F811
    """LD_PRELOAD for the shim (`compiled.preload_shim`: after ASan's runtime when the
    driver is built with it, MT_TEST_SANITIZE)."""
    return preload_shim(c_client, shim_source(IVL_MS), tmp_path_factory.mktemp("shim"))


@pytest.mark.timeout(120)
def test_a_keyed_c_close_to_a_silent_peer_says_not_a_receiver_not_the_key(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    short_handshake: str,
    silent: tuple[str, list[socket.socket]],  # noqa: F811
) -> None:
    endpoint, accepted = silent
    close_timeout = 5 * IVL_MS / 1000  # (four handshakes time out before it)
    script = f"close_timeout {close_timeout}\nfield u 1 1 4\nstart\nsend 0 u 1 4 0\nclose\n"
    env = {
        "MELISSA_TRAINER_ENDPOINTS": endpoint,
        "MELISSA_TRAINER_SIMULATION_ID": "7",
        "MELISSA_TRAINER_KEY": zmq.curve_keypair()[0].decode(),
        "LD_PRELOAD": short_handshake,
    }
    result = run_script(script_exe, script, tmp_path, env, timeout=90)
    code, message = result[max(result)]  # (the close's)
    assert MISMATCH not in message, message  # (before: MT_EENV, the server key ...)
    assert len(accepted) >= 4, (len(accepted), result)  # (three timed out, at least)
    assert code == MT_ETIMEDOUT and f"{endpoint}: {NOT_RECEIVER}" in message, result
