"""The C client's `mt_predict` when the trainer dies after the request found its
connection up and before it sent (the Python client's case:
tests/client/test_predict_trainer_gone.py,
test_a_connection_dropped_just_before_the_send_fails_at_once).

ZeroMQ posts the DISCONNECTED before it closes the connection's pipe, which takes the
request meanwhile and never answers it. The client read that event as one of an
earlier connection and dropped it: the request waited its whole timeout (the Python
client's test hung in CI), or, the pipe closed by then, the send said "went". Now the
request returns `MT_ETIMEDOUT` at once, saying the connection was lost.

The instant is made by a shim preloaded into the driver (LD_PRELOAD) around
`zmq_poll`: once the test has written the server's pid into a file, the next poll that
finds the prediction socket writable (`mt_watch_connected`'s: a connection to send on)
kills that process and waits until the monitor it polls beside has an event (the
drop) before it returns. Nothing else changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from compiled import CClient, c_client, preload_shim  # noqa: F401 (a fixture)
from predict_runs import CPredict
from predict_script import MT_ETIMEDOUT, outputs_of
from server_process import kill_all, start_server

pytestmark = pytest.mark.e2e  # every test here starts a process

#: longer than the test's own timeout: a request that waits for it fails the test
LONG = 120

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zmq.h>
int zmq_poll(zmq_pollitem_t *items, int n, long timeout) {
    static int (*real)(zmq_pollitem_t *, int, long);
    if (real == NULL) real = (int (*)(zmq_pollitem_t *, int, long))dlsym(RTLD_NEXT, "zmq_poll");
    int ready = real(items, n, timeout);
    const char *path = getenv("SHIM_KILL_FILE");
    FILE *f;
    long pid = 0;
    if (ready > 0 && n == 2 && items[0].events == ZMQ_POLLOUT &&
        (items[0].revents & ZMQ_POLLOUT) && items[1].events == ZMQ_POLLIN && path != NULL &&
        (f = fopen(path, "r")) != NULL) {
        if (fscanf(f, "%ld", &pid) != 1) pid = 0;
        fclose(f);
        unlink(path);
        if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0) {
            zmq_pollitem_t monitor[1] = {{items[1].socket, 0, ZMQ_POLLIN, 0}};
            if (real(monitor, 1, 30000) != 1) fprintf(stderr, "shim: no monitor event\n");
        }
    }
    return ready;
}
"""


@pytest.fixture(scope="module")
def kill_at_send(tmp_path_factory: pytest.TempPathFactory, c_client: CClient) -> str:  # noqa: F811
    """LD_PRELOAD for the shim (`compiled.preload_shim`)."""
    return preload_shim(c_client, SHIM, tmp_path_factory.mktemp("shim"))


@pytest.mark.timeout(60)
def test_a_connection_dropped_just_before_the_send_fails_at_once(
    c_predict: CPredict, tmp_path: Path, kill_at_send: str
) -> None:
    first, endpoint = start_server(tmp_path, 1, hold=False)
    trigger = tmp_path / "kill.pid"
    env = {
        "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv"),
        "LD_PRELOAD": kill_at_send,
        "SHIM_KILL_FILE": str(trigger),
    }
    try:
        with c_predict.script(env, 0) as script:
            lines = script.wait(script.send(f"predict {LONG}"))
            assert outputs_of({0: lines}, 0)[0] == 1, lines  # (answered: version 1)
            trigger.write_text(str(first.pid))
            lines = script.wait(script.send(f"predict {LONG}"))
            code, _, message = lines[-1].partition(" ")
            assert not trigger.exists()  # (the shim killed the server at that poll)
            assert first.wait(timeout=30) == -9
            # (before the fix: "went", or LONG seconds, past the test's timeout)
            assert int(code) == MT_ETIMEDOUT, message
            assert "was lost as the request was about to be sent" in message, message
            assert endpoint in message
            # found gone: the backoff's requests fail at once, as after any loss
            lines = script.wait(script.send(f"predict {LONG}"))
            code, _, message = lines[-1].partition(" ")
            assert int(code) == MT_ETIMEDOUT and "at an earlier request" in message, message
            script.finish()
    finally:
        kill_all(first)
