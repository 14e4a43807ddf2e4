"""The C client's `mt_predict` given its serving endpoint (no serve file) asks the trainer
which inputs it serves (DESCRIBE, docs/protocol.md section 16;
clients/c/src/predict_describe.c) and checks each request before sending it.

User trial 32: a double array for a 1024 x 1024 float input (8 MiB for 4 MiB declared)
was over the serving socket's ZMQ_MAXMSGSIZE (the inputs' bytes + 1 MiB): the trainer's
ZeroMQ closed the connection without a word and the request came back MT_ETIMEDOUT "...
was lost ... (the trainer stopped or died)", a fallback, silently, for a mistake in the
solver. Now: MT_EDTYPE with the serve file's words ("cast it to <f4"), nothing sent.
Also: a malformed answer is MT_EREPLY naming the endpoint, nothing sent; a trainer from
before DESCRIBE (it refuses it bad_request) gets the requests unchecked, as before.

Real parts: the compiled client (`clients/c/tests/mt_script.c`) in its own process, the
trainer's real serving socket (`PredictServer`), or a ROUTER playing an older one.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.wire.predict_describe import encode_description, is_describe

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EDTYPE, MT_EREPLY = 3, 13


def run(script_exe: Path, sink: str, endpoint: str, asks: list[list[str]]) -> list[list[str]]:
    """The output lines of each request of `asks` (an mt_script's commands each, the
    last a ``predict``), asked of `endpoint` (MELISSA_TRAINER_SERVE_ENDPOINTS)."""
    lines, at = ["id 3", f"endpoints {sink}", "field x 1 1 3", "start"], []
    for commands in asks:
        lines += ["unstage", *commands]
        at.append(len(lines))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [str(script_exe)], input="".join(f"{line}\n" for line in lines),
        capture_output=True, text=True, env={**clean, "MELISSA_TRAINER_SERVE_ENDPOINTS": endpoint},
        timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out: dict[int, list[str]] = {}
    for text in proc.stdout.splitlines():
        number, rest = text.split(" ", 1)
        out.setdefault(int(number), []).append(rest)
    return [out[n] for n in at]


@pytest.mark.timeout(120)
def test_a_double_array_for_a_large_float_input_is_edtype_nothing_sent(
    script_exe: Path, sink: str
) -> None:
    server = PredictServer({"u": ((1024, 1024), "float32")}, bind="tcp://127.0.0.1:*")
    server.start()
    server.serving = True
    try:
        assert server.endpoint is not None
        (lines,) = run(
            script_exe, sink, server.endpoint, [["input u 2 2 1024 1024 :", "predict 30"]]
        )
        counts = server.telemetry()
    finally:
        server.stop()
    code, _, message = lines[-1].partition(" ")
    said = "mt_predict: input 'u' is <f8 (1024, 1024), declared <f4 (1024, 1024) (cast it to <f4"
    assert (int(code), message.strip()[: len(said)]) == (MT_EDTYPE, said), lines
    assert counts == {"described": 1}  # (the request itself never sent)


class OldTrainer:
    """A serving ROUTER in a thread answering each message with `answer(frames)`."""

    def __init__(self, answer: Callable[[list[bytes]], list[bytes]]) -> None:
        self._ctx = zmq.Context()
        self._router = self._ctx.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.bind("tcp://127.0.0.1:*")
        self.endpoint = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.received: list[list[bytes]] = []
        self._answer, self._stop = answer, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._router.poll(50):
                identity, *frames = self._router.recv_multipart()
                self.received.append(frames)
                self._router.send_multipart([identity, *self._answer(frames)])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._router.close(linger=0)
        self._ctx.term()


def _ids(frames: list[bytes]) -> tuple[int, int]:
    sim, rid = protocol.peek_simulation_id(frames[0]), protocol.peek_request_id(frames[0])
    assert sim is not None and rid is not None
    return sim, rid


@pytest.mark.timeout(120)
def test_a_trainer_before_describe_gets_requests_unchecked_and_a_bad_answer_is_ereply(
    script_exe: Path, sink: str
) -> None:
    def old(frames: list[bytes]) -> list[bytes]:
        sim, rid = _ids(frames)
        if is_describe(frames):  # (what PredictServer before DESCRIBE answered)
            detail = "bad_request: a PREDICT carries at least one array"
            return [protocol.encode_refused(sim, rid, 0, "bad_request", detail)]
        return protocol.encode_prediction(sim, rid, 4, {"y": np.ones(2, np.float32)})

    def malformed(frames: list[bytes]) -> list[bytes]:
        sim, rid = _ids(frames)
        specs = protocol.field_specs({"u": ((4,), "float32")})
        return [encode_description(sim, rid, 0, specs) + b"junk"]

    ask = ["input u 2 1 3 : 1 2 3", "output y 1 4", "predict 20"]
    older, bad = OldTrainer(old), OldTrainer(malformed)
    try:
        answered = run(script_exe, sink, older.endpoint, [ask, ask])
        (refused,) = run(script_exe, sink, bad.endpoint, [ask])
    finally:
        older.close()
        bad.close()
    for lines in answered:  # (unchecked: the trainer's to judge, as before)
        assert [line.strip() for line in lines] == ["version 4", "out y 1 2 : 1 1", "0"], lines
    assert [is_describe(f) for f in older.received] == [True, False, False]  # (once)
    code, _, message = refused[-1].partition(" ")
    assert int(code) == MT_EREPLY, refused
    assert "malformed answer to DESCRIBE" in message and bad.endpoint in message, message
    assert len(bad.received) == 1  # (the DESCRIBE only)
