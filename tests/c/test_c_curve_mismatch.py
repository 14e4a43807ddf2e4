"""A receiver that refuses the compiled C client's handshake is an error, not a silent
loss: with a CURVE key the receiver does not hold (another receiver's, a stale
rendezvous file's), with a key for a receiver without CURVE, or with none for one with
it, ZeroMQ delivers nothing and says so only to a socket monitor; `mt_client_close`
used to return MT_OK (or MT_ETIMEDOUT a minute later, naming no cause). It is now
MT_EENV, with a message naming the endpoint and the fix: at the first send after ZeroMQ
reported the refusal, else at the close, which waits for every handshake.

The oracle: a real receiver (`Receiver`, CURVE on or off), whose buffer shows what
arrived; with the right key it takes every time step, bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from c_driver import payload, run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import drain, running

from melissa_trainer.buffers import FIFOBuffer

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_EENV = 6
STEPS = 6
FLOAT32 = 1  # the protocol's dtype code
#: what the message of a refused key must say (the cause and the fix)
MISMATCH = "the server key does not match: check MELISSA_TRAINER_KEY / the rendezvous file"
#: a key for a receiver without CURVE: the Python client's words (client/handshake.py
#: PLAIN); MISMATCH when its mechanism mismatch lost its detail, under load (`named`)
PLAIN = (
    "the receiver takes plain (unencrypted) connections and this client has a CURVE key "
    "for it: unset MELISSA_TRAINER_KEY (or check the endpoint / the rendezvous file if "
    "that receiver should use CURVE)"
)


#: what a refusal without detail adds for a client with a key (client/handshake.py
#: UNDETAILED_PLAIN): the plain receiver's advice, when its mismatch lost its detail
UNDETAILED_PLAIN = (
    "; or the receiver takes plain (unencrypted) connections: unset MELISSA_TRAINER_KEY"
)


def named(said: str, text: str) -> bool:
    """Whether `text` has the words `said` (for PLAIN, its detail lost: MISMATCH with
    the plain receiver's advice after it, which the user needs either way)."""
    return said in text or (said == PLAIN and MISMATCH in text and UNDETAILED_PLAIN in text)


def stream(exe: Path, tmp_path: Path, endpoint: str, key: str | None) -> dict:
    """The C client's statuses of STEPS steps to `endpoint` with CURVE key `key`;
    close_timeout 1800 s (the default): a refusal must be said at once, not time out."""
    sends = "".join(f"send {t} u {FLOAT32} 4 {t}\n" for t in range(STEPS))
    script = f"close_timeout 60\nfield u {FLOAT32} 1 4\nstart\n{sends}close\n"
    env = {"MELISSA_TRAINER_ENDPOINTS": endpoint, "MELISSA_TRAINER_SIMULATION_ID": "7"}
    if key is not None:
        env["MELISSA_TRAINER_KEY"] = key
    return run_script(exe, script, tmp_path, env, timeout=50)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("server_curve", "client_key", "said"),
    [
        (True, "another", MISMATCH),  # another receiver's key, or a stale one
        (False, "another", PLAIN),  # a key for a receiver without CURVE
        (True, None, "no CURVE key is known for it here: set MELISSA_TRAINER_KEY"),
    ],
    ids=["wrong_key", "key_for_plain_receiver", "no_key_for_curve_receiver"],
)
def test_a_refused_handshake_is_an_error_naming_the_key(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    server_curve: bool,
    client_key: str | None,
    said: str,
) -> None:
    buffer = FIFOBuffer(100)
    secret = zmq.curve_keypair()[1] if server_curve else None
    with running(buffer, curve_secret_key=secret, expected_simulations=1) as receiver:
        assert receiver.endpoint is not None
        key = zmq.curve_keypair()[0].decode() if client_key else None
        result = stream(script_exe, tmp_path, receiver.endpoint, key)
        # the first call that fails (a send, if ZeroMQ reported the refusal by then; else
        # the close, which waits for it) says why; the close fails in either case
        failed = [(code, text) for _, (code, text) in sorted(result.items()) if code]
        code, text = failed[0]
        assert code == MT_EENV and named(said, text) and receiver.endpoint in text, result
        assert "nothing sent to it was delivered" in text, text
        assert result[max(result)][0] != 0, result
        assert len(buffer) == 0  # (the oracle: nothing arrived, as the message says)


@pytest.mark.timeout(120)
def test_the_right_key_still_delivers_every_step(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    buffer = FIFOBuffer(100)
    with running(buffer, curve_secret_key=zmq.curve_keypair()[1], expected_simulations=1) as rec:
        assert rec.endpoint is not None and rec.curve_public_key is not None
        result = stream(script_exe, tmp_path, rec.endpoint, rec.curve_public_key)
        assert all(code == 0 for code, _ in result.values()), result
        got = drain(buffer)  # (the stream ends at the BYE)
    assert sorted(int(s["time_step"]) for s in got) == list(range(STEPS))
    for s in got:
        assert s["u"].tobytes() == payload(FLOAT32, 4, int(s["time_step"])).tobytes()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("server_curve", [True, False], ids=["wrong_key", "key_for_plain"])
def test_a_refused_handshake_fails_the_sends_not_back_pressure(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    server_curve: bool,
) -> None:
    """A run longer than the queue (sndhwm 10): a send fails with MT_EENV and the key's
    message, at the first step after ZeroMQ reported the refusal or, if a send blocked
    first, when send_timeout ends it: not MT_ETIMEDOUT blaming back-pressure (nor, with
    no send_timeout, a wait for ever)."""
    buffer = FIFOBuffer(100)
    secret = zmq.curve_keypair()[1] if server_curve else None
    with running(buffer, curve_secret_key=secret, expected_simulations=1) as receiver:
        assert receiver.endpoint is not None
        sends = "".join(f"send {t} u {FLOAT32} 4 {t}\n" for t in range(200))
        script = (
            f"send_timeout 10\nsndhwm 10\nbatching 0 1\nfield u {FLOAT32} 1 4\nstart\n"
            f"{sends}close\n"
        )
        env = {
            "MELISSA_TRAINER_ENDPOINTS": receiver.endpoint,
            "MELISSA_TRAINER_SIMULATION_ID": "7",
            "MELISSA_TRAINER_KEY": zmq.curve_keypair()[0].decode(),
        }
        result = run_script(script_exe, script, tmp_path, env, timeout=60)
        failed = [(line, code, said) for line, (code, said) in sorted(result.items()) if code]
        line, code, said = failed[0]
        assert 6 <= line < 206 and code == MT_EENV, failed  # (a send: lines 6 to 205)
        expected = MISMATCH if server_curve else PLAIN
        assert named(expected, said) and receiver.endpoint in said, said
        assert len(buffer) == 0
