"""The C snippet of docs/how-to/serve-while-training.md ("From C and Fortran") works as
a solver copies it (user trial htrial4, 2026-12-06): it compiles under the C client's
own warnings (`CClient.cflags`: `-Wall -Wextra -Werror`; its `mt_output` initializer
left the out-fields uninitialised, a `-Wmissing-field-initializers` warning), and its
status handling leaves no path where `guess` is used unwritten: before, a status that is
neither `MT_OK` nor a fallback's (`MT_ESHAPE`: inputs that are not the trainer's) fell
through, and the solver went on with whatever its `guess` buffer held (garbage at the
first request, the last answer later), where the Python client raises `ValueError` and
the page's Fortran snippet stops.

Real parts: the snippet compiled as the page prints it, inside a program that starts a
client; the trainer's real serving socket (`PredictServer`) answering ``2 u``; the
oracle is numpy's ``2 u``, the fallback ``u`` itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from compiled import CClient

from melissa_trainer.stream.serving import PredictServer

pytestmark = pytest.mark.e2e  # every test here starts a process

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "serve-while-training.md"
SENTINEL = -7.0  # what `guess` holds before the snippet runs: written by no path

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "melissa_trainer.h"

static int solve(mt_client *c) {
    float u[64], guess[64];
    for (int i = 0; i < 64; ++i) {
        u[i] = (float)i;
        guess[i] = SENTINEL;
    }
    /* the page's snippet, as printed */
SNIPPET
    for (int i = 0; i < 64; ++i) printf("%g\n", guess[i]);
    return 0;
}

int main(void) {
    mt_client *c;
    uint64_t one = 1;
    if (mt_client_create(&c) != MT_OK) return 10;
    mt_declare_field(c, "x", MT_FLOAT32, 1, &one);
    if (mt_client_start(c) != MT_OK) {
        fprintf(stderr, "%s\n", mt_client_error(c));
        return 11;
    }
    int rc = solve(c);
    if (rc == 0) mt_client_abort(c); /* (a snippet's error path has freed c itself) */
    return rc;
}
"""


def snippet() -> str:
    """The first C block of the page's section "From C and Fortran"."""
    section = PAGE.read_text().split("### From C and Fortran", 1)[1]
    match = re.search(r"```c\n(.*?)```", section, re.S)
    assert match is not None, "no C block in the section"
    return match.group(1)


@pytest.fixture
def sink() -> Iterator[str]:
    """A PULL endpoint for the stream the client must start (nothing is sent there)."""
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    yield str(pull.getsockopt_string(zmq.LAST_ENDPOINT))
    ctx.destroy(linger=0)


@pytest.fixture
def program(c_client: CClient, tmp_path: Path) -> Path:
    """The snippet in a program, compiled with the C client's flags (warnings are errors)."""
    source = tmp_path / "snippet.c"
    code = textwrap.indent(snippet(), "    ")  # (indented as the function's body)
    body = PROGRAM.replace("SENTINEL", f"{SENTINEL}f").replace("SNIPPET", code)
    source.write_text(body)
    return c_client.compile(source, tmp_path / "snippet")


def run(program: Path, sink: str, serve_endpoint: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env = {
        **clean,
        "MELISSA_TRAINER_SIMULATION_ID": "0",
        "MELISSA_TRAINER_ENDPOINTS": sink,
        "MELISSA_TRAINER_SERVE_ENDPOINTS": serve_endpoint,
    }
    return subprocess.run(
        [str(program)], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def guesses(proc: subprocess.CompletedProcess[str]) -> list[float]:
    return [float(line) for line in proc.stdout.split()]


def serving(shape: int) -> tuple[PredictServer, threading.Event, threading.Thread]:
    """The trainer's serving socket taking u of `shape` float32, answering u_next = 2 u."""
    server = PredictServer({"u": ((shape,), "float32")})
    server.start()
    server.serving = True
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            if server.wait_pending(0.05):
                for p in server.take(8):
                    server.answer(p, {"u_next": 2 * p.request.arrays["u"]}, 3)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return server, stop, thread


@pytest.mark.timeout(240)
def test_the_pages_c_snippet_compiles_and_uses_the_answer_or_falls_back(
    program: Path, sink: str
) -> None:
    u = [float(i) for i in range(64)]
    server, stop, thread = serving(64)
    try:
        answered = run(program, sink, server.endpoint or "")
    finally:
        stop.set()
        thread.join(10)
        server.stop()
    assert answered.returncode == 0, answered.stderr
    assert guesses(answered) == [2 * x for x in u]

    # nothing listens there any more: MT_ETIMEDOUT at once, the solver's own guess
    fallen_back = run(program, sink, server.endpoint or "")
    assert fallen_back.returncode == 0, fallen_back.stderr
    assert guesses(fallen_back) == u


@pytest.mark.timeout(240)
def test_the_pages_c_snippet_stops_on_inputs_that_are_not_the_trainers(
    program: Path, sink: str
) -> None:
    server, stop, thread = serving(32)  # the trainer takes u of 32, the solver sends 64
    try:
        proc = run(program, sink, server.endpoint or "")
    finally:
        stop.set()
        thread.join(10)
        server.stop()
    # before: exit 0, guess unwritten (the sentinel) and used as the solver's guess
    assert proc.returncode != 0, proc.stdout
    assert SENTINEL not in guesses(proc)
    assert "input 'u' is <f4 (64,), declared <f4 (32,)" in proc.stderr, proc.stderr
