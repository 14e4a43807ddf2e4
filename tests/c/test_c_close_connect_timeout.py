"""A C solver's first connect to a host that never answers (its SYNs dropped: a wrong or
unreachable host) is bounded by the client, as the Python client's
(tests/client/test_connect_timeout.py): ZeroMQ abandons it after the data socket's
ZMQ_CONNECT_TIMEOUT, the disconnected timeout (clients/c/src/handshake.c
mt_connect_timeout_ms), and the receiver then counts down since the socket connected.

Before: a connect in progress is not down (handshake.c), so the close waited for the
kernel to give up (~127 s on Linux defaults), silent, and here for its whole close
timeout: "queued messages not delivered within close_timeout=30.0 s". The host is a
listener whose accept queue is full (`backlogged`: the kernel drops the SYNs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from backlogged import backlogged  # noqa: F401 (a fixture)
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_endpoint_never import MT_ETIMEDOUT, never, run

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.timeout(120)
def test_a_close_to_a_host_that_never_answers_gives_up_after_the_disconnected_timeout(
    script_exe: Path,  # noqa: F811
    backlogged: str,  # noqa: F811
) -> None:
    code, message = run(
        script_exe, "id 2", f"endpoints {backlogged}", "close_timeout 30", "replay_bytes 0",
        "disconnected_timeout 2", "field u 1 1 4", "start", "send 0 u 1 4 0", "close",
    )  # fmt: skip
    assert code == MT_ETIMEDOUT, message
    assert f"to {backlogged}: the receiver is unreachable, tried for " in message, message
    assert message.endswith(f"(mt_set_disconnected_timeout=2.0 s): {never(backlogged)}"), message
    assert "close_timeout" not in message, message
