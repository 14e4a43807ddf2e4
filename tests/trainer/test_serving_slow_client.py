"""A slow client and a flood against a real trainer (issue 47's test list): while a study
trains with a `ServingHook` (a small queue, `max_queue=4`), a client process floods the
serving socket with requests and never reads a reply. Held, end to end:

* the flood is refused ``busy`` beyond the queue (back-pressure, not an unbounded
  queue): every one of its requests is counted, answered or refused;
* the other simulations (`Client.predict`, real processes launched by the study) are
  still answered, each with the model of the version it names (the weights recorded at
  every step: the oracle), and may be refused ``busy`` meanwhile, which they retry;
* training is not stalled: every sample is trained on, and the trainer ends (the
  replies the slow client never read are dropped, not waited for).

The same rules against the serving socket alone, to the request, are in
tests/stream/test_serving_load.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serving_parts import Weights, linear, python_simulation, serving_hook, serving_study

from melissa_trainer import (
    Hook,
    ServingHook,
    TrainerControl,
    TrainerState,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SIMULATIONS, STEPS, ASK_EVERY, FLOOD = 2, 40, 10, 3000

SLOW = r"""
import os, sys
import numpy as np
import zmq
from melissa_trainer import wire as protocol

ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.SNDHWM, 0)
sock.setsockopt(zmq.RCVHWM, 1)  # (it reads nothing: the trainer's replies pile up there)
sock.connect(os.environ["ENDPOINT"])
x = np.ones(3, np.float32)
for i in range(int(os.environ["N"])):
    sock.send_multipart(protocol.encode_predict(99, i, 0, None, {"x": x}))
print("sent", flush=True)
sys.stdin.read()  # never reads a reply; killed by the test
"""


class SlowClient(Hook):
    """At step 2, starts the slow client and holds the training thread until the
    serving socket has read its whole flood (so the flood meets a served queue)."""

    def __init__(self, serving: ServingHook, script: Path) -> None:
        self.serving, self.script = serving, script
        self.proc: subprocess.Popen[str] | None = None

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step != 2:
            return
        before = self.serving.telemetry().get("requests", 0)
        env = {**os.environ, "ENDPOINT": self.serving.endpoint or "", "N": str(FLOOD)}
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "sent"
        while self.serving.telemetry().get("requests", 0) < before + FLOOD:  # (sims ask too)
            assert self.proc.poll() is None
            threading.Event().wait(0.01)


@pytest.mark.timeout(240)
def test_a_flooding_client_that_reads_nothing_stalls_neither_training_nor_the_others(
    tmp_path: Path,
) -> None:
    command = python_simulation(tmp_path / "sim.py", STEPS, ASK_EVERY)
    slow_script = tmp_path / "slow.py"
    slow_script.write_text(SLOW)
    serving = serving_hook(max_queue=4)
    weights = Weights()
    slow = SlowClient(serving, slow_script)
    trainer, _ = serving_study(tmp_path, command, SIMULATIONS, [weights, serving, slow])
    try:
        state = trainer.train()
        assert slow.proc is not None and slow.proc.poll() is None  # it never read, still there
    finally:
        if slow.proc is not None:
            slow.proc.kill()
            slow.proc.wait()
    assert state.global_step == SIMULATIONS * STEPS  # training not stalled: every sample

    sims_answered, sims_busy = 0, 0
    for sid in range(SIMULATIONS):
        record = json.loads((tmp_path / f"sim{sid}.json").read_text())
        assert len(record["answers"]) == STEPS // ASK_EVERY  # the others still answered
        assert set(record["refusals"]) <= {"not_serving", "busy"}
        for answer in record["answers"]:
            expected = linear(weights.by_version[answer["version"]], np.array(answer["x"]))
            np.testing.assert_allclose(answer["y"], expected, rtol=1e-5, atol=1e-6)
        sims_answered += len(record["answers"])
        sims_busy += record["refusals"].count("busy")

    counts = serving.telemetry()
    flood_busy = counts.get("refused_busy", 0) - sims_busy
    flood_answered = counts["answered"] - sims_answered
    assert flood_busy > 0  # back-pressure: refused, not queued without bound
    # every request of the flood was counted once: answered (its replies dropped unread),
    # refused busy, or expired (none has a timeout: none expires)
    assert flood_answered + flood_busy == FLOOD, counts
    assert counts.get("expired", 0) == 0
