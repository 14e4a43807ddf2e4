"""The C client's `mt_predict` with inputs that are not the trainer's, and no serve
file to check them against (the endpoint given: `MELISSA_TRAINER_SERVE_ENDPOINTS`).

The trainer refuses such a request ``bad_request`` (its detail ``bad_inputs: ...`` or
``too_large: ...`` names the array and what it serves). It used to come out of the C
client as `MT_EREFUSED`, which docs/how-to/serve-while-training.md's C example falls
back from: a simulation with a wrong shape, dtype or name fell back silently on every
request, forever (the Python client raises ValueError there, and C itself checks before
sending when a serve file gave the inputs). It was then `MT_EINVAL`, a mistake to fix,
with the trainer's detail in `mt_client_error`. Since DESCRIBE (user trial 32: a request
more than 1 MiB over the inputs never reached the trainer) the client asks the trainer
for its inputs and checks each request before sending it, as with a serve file: the
same codes (`MT_ESHAPE`, `MT_EFIELD`, `MT_EDTYPE`) and words, nothing sent; the next,
correct request is answered.

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

MT_EFIELD, MT_EDTYPE, MT_ESHAPE = 2, 3, 4
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
def test_inputs_that_are_not_the_trainers_are_checked_before_sending_not_a_fallback(
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
        "batch": ["unstage", "input u 1 2 2 4 : 1 2 3 4 5 6 7 8", "output y 1 4", "predict 20"],
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

    for what, code, said in (  # the serve file's words (predict.c check_inputs)
        ("shape", MT_ESHAPE, "mt_predict: input 'u' is <f4 (3,), declared <f4 (4,)"),
        (
            "name",
            MT_EFIELD,
            "mt_predict: arrays ['v'], the trainer serves inputs ['u'] "
            "(unknown: 'v'; missing: 'u')",
        ),
        ("dtype", MT_EDTYPE, "mt_predict: input 'u' is <f8 (4,), declared <f4 (4,) (cast it"),
        (  # (the Python client's words: tests/client/test_predict_dtype.py)
            "batch",
            MT_ESHAPE,
            "mt_predict: input 'u' is <f4 (2, 4), declared <f4 (4,) (a request is one sample, "
            "without a batch dimension: drop the leading 2, one request per sample)",
        ),
    ):
        got, message = status(what)
        assert (got, message[: len(said)]) == (code, said), f"{what}: {got} {message}"
    assert status("good") == (0, "")
    assert out[at["good"]][:2] == ["version 5", "out y 1 4 : 7 9 11 13"]
    # (described once, on the one connection; nothing wrong sent)
    assert server.telemetry() == {"described": 1, "requests": 1, "answered": 1}
