"""The C client's `MELISSA_TRAINER_KEY`, as the Python client's
(`melissa_trainer.client.config.resolve_receivers`): the receivers' CURVE public key for
endpoints given by `mt_set_endpoints` or `MELISSA_TRAINER_ENDPOINTS`; a key that is not
40 Z85 characters is `MT_EENV` at `mt_client_start`, with the Python client's message
(tests/c/test_c_stream_key_z85.py: each fault). The
oracle: a CURVE PULL server receives (and the wire codec decodes) the messages only of
a client that holds its public key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import curve_pull_server
from predict_script import Script, status

from melissa_trainer import wire as p
from melissa_trainer.client import Client

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_EENV = 6


@pytest.fixture
def server() -> Iterator[tuple[zmq.Socket, str, str]]:
    """A CURVE PULL server on loopback: the socket, its endpoint and its public key."""
    with curve_pull_server() as server:
        yield server


def run(exe: Path, env: dict[str, str], *lines: str) -> tuple[dict[int, list[str]], list[int]]:
    """An mt_script given `lines`, one at a time: each line's outputs, and the numbers."""
    script = Script(exe, env)
    try:
        numbers = [script.send(line) for line in lines]
        out, _ = script.finish()
    finally:
        script.kill()
    return out, numbers


@pytest.mark.timeout(180)
def test_the_stream_key_of_the_environment_as_the_python_client(
    script_exe: Path,  # noqa: F811
    server: tuple[zmq.Socket, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sock, endpoint, public = server
    steps = ["close_timeout 10", "field u 1 1 4", "start", "send 0 u 1 4 0", "close"]
    env = {"MELISSA_TRAINER_ENDPOINTS": endpoint, "MELISSA_TRAINER_KEY": f" {public} "}
    out, numbers = run(script_exe, env, "id 4", *steps)
    if status(out, numbers[3])[0] != 0 and "built without" in status(out, numbers[3])[1]:
        pytest.skip(f"the C client's libzmq: {status(out, numbers[3])[1]}")
    assert [status(out, n)[0] for n in numbers] == [0] * len(numbers), out
    assert sock.poll(10_000), "the CURVE receiver heard nothing"
    first = p.decode(sock.recv_multipart()[0])  # (decoded by the wire codec: it passed)
    assert isinstance(first, (p.Hello, p.Data)) and first.simulation_id == 4
    # endpoints given by mt_set_endpoints take the key too (as Python's endpoints=)
    keyed = {"MELISSA_TRAINER_KEY": public}
    out, numbers = run(script_exe, keyed, "id 5", f"endpoints {endpoint}", *steps)
    assert [status(out, n)[0] for n in numbers] == [0] * len(numbers), out
    assert sock.poll(10_000), "the CURVE receiver heard nothing"
    while (first := p.decode(sock.recv_multipart()[0])).simulation_id == 4:
        assert sock.poll(10_000), "the CURVE receiver heard nothing of simulation 5"
    assert isinstance(first, (p.Hello, p.Data)) and first.simulation_id == 5
    # a malformed key: refused at start, with the Python client's words
    bad = {"MELISSA_TRAINER_ENDPOINTS": endpoint, "MELISSA_TRAINER_KEY": "not-a-key"}
    out, numbers = run(script_exe, bad, "id 6", "field u 1 1 4", "start")
    code, message = status(out, numbers[-1])
    for name, value in bad.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as python_error:
        Client({"u": ((4,), "float32")}, simulation_id=6)
    said = "the receivers' CURVE key (MELISSA_TRAINER_KEY) must be the 40-character Z85"
    assert code == MT_EENV and said in message, (code, message)
    assert said in str(python_error.value) and "not 'not-a-key'" in message
