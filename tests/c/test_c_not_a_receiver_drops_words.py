"""A C client without a CURVE key whose peer ends every ZeroMQ handshake without a
detail (another program at the endpoint: an HTTP server that answers the ZeroMQ
greeting with "400 Bad request" and hangs up) is told that the peer is not a receiver,
check the endpoint, as the Python client is (client/handshake.py `NOT_RECEIVER_DROPS`,
tests/client/test_close_bye_not_a_receiver.py). Before, clients/c/src/handshake.c said
"it takes CURVE (encrypted) connections only ... set MELISSA_TRAINER_KEY" and nothing
else. The CURVE advice now follows "check the endpoint": a CURVE-only receiver refuses
a client without a key with a mechanism mismatch (a detail: that advice alone), but the
detail can be lost on the way (tests/c/test_c_curve_mismatch.py under load).

(``python -m http.server`` itself waits for a line that the ZeroMQ greeting never
ends, so it is a silent peer: tests/c/test_c_close_notice.py. The peer here answers as
an HTTP server does to a line it cannot parse, with `http.server`'s own status line.)"""

from __future__ import annotations

from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from http_peer import http_peer
from predict_script import MT_EENV, Script

from melissa_trainer.client.handshake_words import NOT_RECEIVER_DROPS

pytestmark = pytest.mark.e2e  # (a process)


@pytest.fixture
def http_junk() -> Iterator[str]:
    """An endpoint whose program answers each connection as an HTTP server answers a bad
    request line, and hangs up."""
    status = HTTPStatus.BAD_REQUEST
    with http_peer(f"HTTP/1.0 {status.value} {status.phrase}\r\n\r\n".encode()) as endpoint:
        yield endpoint


@pytest.mark.timeout(120)
def test_a_keyless_c_close_to_a_peer_ending_every_handshake_says_not_a_receiver(
    script_exe: Path,  # noqa: F811
    http_junk: str,
) -> None:
    script = Script(script_exe)
    try:
        setup = (f"endpoints {http_junk}", "close_timeout 60", "replay_bytes 0")
        sent = script.send("id 3", *setup, "field u 1 1 4", "start", "send 0 u 1 4 0")
        script.wait(sent)
        closed = script.send("close")
        lines, err = script.finish(120)
    finally:
        script.kill()
    code, _, message = lines[closed][-1].partition(" ")
    assert int(code) == MT_EENV, (message, err)
    assert message == f"simulation 3 rank 0: to {http_junk}: {NOT_RECEIVER_DROPS}", message
    assert message.index("check the endpoint") < message.index("MELISSA_TRAINER_KEY"), message
