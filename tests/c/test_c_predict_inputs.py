"""The C client's `mt_predict` with inputs that are not the trainer's, and no serve
file to check them against (the endpoint given: `MELISSA_TRAINER_SERVE_ENDPOINTS`).

The trainer refuses such a request ``bad_request`` (its detail ``bad_inputs: ...`` or
``too_large: ...`` names the array and what it serves). It used to come out of the C
client as `MT_EREFUSED`, which docs/how-to/serve-while-training.md's C example falls
back from: a simulation with a wrong shape, dtype or name fell back silently on every
request, forever (the Python client raises ValueError there, and C itself checks before
sending when a serve file gave the inputs). It is now `MT_EINVAL`, a mistake to fix,
with the trainer's detail in `mt_client_error`; the next, correct request is answered.

Real parts: the compiled client (`clients/c/tests/mt_script.c`) in its own process, the
trainer's real serving socket (`PredictServer`), the Python codec as the oracle for the
answer.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from melissa_trainer.stream.serving import PredictServer

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EINVAL, MT_EREFUSED = 1, 12
VERSION = 5


@pytest.fixture
def sink() -> Iterator[str]:
    """A PULL endpoint for the stream the client must start (nothing is sent there)."""
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    yield str(pull.getsockopt_string(zmq.LAST_ENDPOINT))
    ctx.destroy(linger=0)


def serve(server: PredictServer, stop: threading.Event) -> threading.Thread:
    """Answer y = 2 u + VERSION until `stop` (the trainer's side, without a model)."""

    def run() -> None:
        while not stop.is_set():
            if server.wait_pending(0.05):
                for p in server.take(8):
                    server.answer(p, {"y": 2 * p.request.arrays["u"] + VERSION}, VERSION)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.timeout(120)
def test_inputs_the_trainer_refuses_are_einval_not_a_fallback(
    script_exe: Path,
    sink: str,
) -> None:
    server = PredictServer({"u": ((4,), "float32")})
    server.start()
    server.serving = True
    stop = threading.Event()
    thread = serve(server, stop)
    lines = ["id 3", f"endpoints {sink}", "field x 1 1 3", "start"]
    asks = {  # (dtype 1: float32, 2: float64)
        "shape": ["unstage", "input u 1 1 3 : 1 2 3", "output y 1 4", "predict 20"],
        "name": ["unstage", "input v 1 1 4 : 1 2 3 4", "output y 1 4", "predict 20"],
        "dtype": ["unstage", "input u 2 1 4 : 1 2 3 4", "output y 1 4", "predict 20"],
        "good": ["unstage", "input u 1 1 4 : 1 2 3 4", "output y 1 4", "predict 20"],
    }
    at = {}
    for what, commands in asks.items():
        lines += commands
        at[what] = len(lines)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    env = {**clean, "MELISSA_TRAINER_SERVE_ENDPOINTS": server.endpoint or ""}
    try:
        proc = subprocess.run(
            [str(script_exe)], input="".join(f"{line}\n" for line in lines),
            capture_output=True, text=True, env=env, timeout=90,
        )  # fmt: skip
    finally:
        stop.set()
        thread.join(10)
        server.stop()
    assert proc.returncode == 0, proc.stderr
    out: dict[int, list[str]] = {}
    for text in proc.stdout.splitlines():
        number, rest = text.split(" ", 1)
        out.setdefault(int(number), []).append(rest)

    def status(what: str) -> tuple[int, str]:
        code, _, message = out[at[what]][-1].partition(" ")
        return int(code), message.strip()

    for what, named, served in (  # the array, and what the trainer serves
        ("shape", "'u' is <f4 (3,)", "<f4 (4,)"),
        ("name", "arrays ['v']", "serves inputs ['u']"),
        ("dtype", "'u' is <f8 (4,)", "<f4 (4,)"),
    ):
        code, message = status(what)
        assert code == MT_EINVAL, f"{what}: {code} {message}"
        assert message.startswith("mt_predict: the trainer refused the inputs: "), message
        assert named in message and served in message, message
    assert status("good") == (0, "")
    assert out[at["good"]][:2] == ["version 5", "out y 1 4 : 7 9 11 13"]
    counts = server.telemetry()
    assert counts["answered"] == 1
    assert counts["rejected_bad_inputs"] + counts["rejected_too_large"] == 3
