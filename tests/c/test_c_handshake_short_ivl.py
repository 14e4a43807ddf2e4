"""The C client's stream close to a peer that accepts TCP and never answers, with a
handshake interval below the 2 s bound of handshake.c's rule (NOT_ZMQ_AFTER_S): each of
libzmq's handshake timeouts (every `IVL_MS`) ended a connection younger than the bound
and counted as a refusal, so that the close said "the server key does not match"
(keyed) or "not a melissa-trainer receiver, or a receiver that takes CURVE ... only"
(key-less) after two intervals. The bound is now mt_timeout_bound: the smaller of 2 s
and half the socket's interval, as the Python client's
(tests/client/test_handshake_short_ivl.py). Failed before (MT_EENV)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import zmq
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import CClient, c_client  # noqa: F401 (a fixture)
from handshake_shim import build_shim
from silent_peer import silent  # noqa: F401 (a fixture)

from melissa_trainer.client.handshake_words import MISMATCH, NOT_RECEIVER, NOT_RECEIVER_DROPS

pytestmark = [
    pytest.mark.e2e,  # a compiled driver, seconds of handshake intervals
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_ETIMEDOUT = 8
IVL_MS = 600


@pytest.fixture(scope="module")
def short_handshake(tmp_path_factory: pytest.TempPathFactory, c_client: CClient) -> str:  # noqa: F811
    return build_shim(tmp_path_factory.mktemp("shim"), IVL_MS, c_client)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_a_c_close_to_a_silent_peer_with_a_short_interval_says_not_a_receiver(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    short_handshake: str,
    silent: tuple[str, list[socket.socket]],  # noqa: F811
    keyed: bool,
) -> None:
    endpoint, accepted = silent
    script = "close_timeout 4\nfield u 1 1 4\nstart\nsend 0 u 1 4 0\nclose\n"
    env = {
        "MELISSA_TRAINER_ENDPOINTS": endpoint,
        "MELISSA_TRAINER_SIMULATION_ID": "7",
        "LD_PRELOAD": short_handshake,
    }
    if keyed:
        env["MELISSA_TRAINER_KEY"] = zmq.curve_keypair()[0].decode()
    result = run_script(script_exe, script, tmp_path, env, timeout=90)
    code, message = result[max(result)]  # (the close's)
    assert MISMATCH not in message and NOT_RECEIVER_DROPS not in message, message  # (before)
    assert len(accepted) >= 4, (len(accepted), result)  # (timed out every 0.6 s)
    assert code == MT_ETIMEDOUT and f"{endpoint}: {NOT_RECEIVER}" in message, result
