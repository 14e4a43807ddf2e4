"""The C client's handshake monitor (clients/c/src/handshake.c) is read only by a close,
never by a send: left unread while a receiver refuses connections, its events must not
stop ZeroMQ (as the Python client's: tests/client/test_monitor_unread.py).

libzmq's I/O thread blocks on a monitor whose queue is full (about 2,000 events with
the default high-water marks): the socket's reconnections then stop, and every socket
of the client's context waits. Each attempt here gives the C client's monitor one event
(a handshake that failed: the peer closed during it). The oracle: a plain TCP listener
counts the client's connection attempts; before the fix they stopped near 2,000.

The C client keeps ZeroMQ's 100 ms reconnection interval (thousands of attempts would
take minutes), so a shim preloaded into the driver (LD_PRELOAD) sets ZMQ_RECONNECT_IVL
to 1 ms on each socket before it connects over TCP; nothing else changes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (fixture)
from compiled import CClient, c_client, preload_shim  # noqa: F401 (a fixture)
from refusing_listener import refusing_listener

pytestmark = pytest.mark.e2e  # starts a compiled driver

#: connection attempts to count: their events are more than a full queue holds
ATTEMPTS = 3000

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <zmq.h>
int zmq_connect(void *s, const char *address) {
    static int (*real)(void *, const char *);
    if (real == NULL) real = (int (*)(void *, const char *))dlsym(RTLD_NEXT, "zmq_connect");
    if (strncmp(address, "tcp://", 6) == 0) {
        int one = 1;
        zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &one, sizeof one);
    }
    return real(s, address);
}
"""


@pytest.fixture(scope="module")
def fast_reconnect(tmp_path_factory: pytest.TempPathFactory, c_client: CClient) -> str:  # noqa: F811
    """LD_PRELOAD for the shim (`compiled.preload_shim`: after ASan's runtime when the
    driver is built with it, MT_TEST_SANITIZE)."""
    return preload_shim(c_client, SHIM, tmp_path_factory.mktemp("shim"))


@pytest.mark.timeout(120, method="thread")  # (a hang inside libzmq ignores signals)
def test_reconnections_go_on_while_nothing_reads_the_c_monitor(
    script_exe: Path,  # noqa: F811
    fast_reconnect: str,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    with refusing_listener() as listener:
        proc = subprocess.Popen(
            [str(script_exe)],  # (the script on stdin, line by line)
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "LD_PRELOAD": fast_reconnect},
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            endpoint = f"tcp://127.0.0.1:{listener.port}"
            proc.stdin.write(
                f"id 1\nendpoints {endpoint}\nclose_timeout 30\nfield u 1 1 4\nstart\n"
            )
            proc.stdin.flush()
            for expected in range(1, 6):  # (each command's status line: the client started)
                assert proc.stdout.readline().split(" ")[:2] == [str(expected), "0"]
            accepted = listener.wait_for(ATTEMPTS, timeout=60)  # (a few seconds' worth)
            assert accepted >= ATTEMPTS, f"reconnections stopped after {accepted} attempts"
            # the close reads what was queued: the refusal, named, within its timeout
            out, err = proc.communicate("close\n", timeout=60)
            status, message = out.split(" ", 2)[1:]
            # (a key-less client whose peer ends every handshake without detail is told
            # it is not a receiver, as the Python client is, the CURVE advice after)
            assert status == "6" and "not a melissa-trainer receiver" in message, (out, err)
            assert "ended every ZeroMQ handshake without completing one" in message, (out, err)
            assert proc.returncode == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
