"""A loopback serving endpoint read from a serve file by a `Predictor` that cannot reach
it (another machine, or another network namespace) is said at once
(`PredictUnreachable`, a `PredictTimeout`: `stream.host_scope`), as a `Client` says it of
the receivers' (tests/stream/test_host_scope.py). Before, each request waited out its
timeout, or failed as a trainer gone, with generic words; a simulation that falls back
on `PredictionUnavailable` never heard why."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import netns
import pytest

from melissa_trainer.stream import host_scope
from melissa_trainer.stream.host_scope import HOST_KEY, SCOPE_KEY, SERVING, out_of_reach
from tests.predict_server import VERSION, answering_server

linux = pytest.mark.skipif(sys.platform != "linux", reason="the scope is read from /proc")

#: a predictor asking twice (the second too is refused at once; one WARNING for both)
PREDICTOR = """
import logging, sys
import numpy as np
from melissa_trainer.client import PredictTimeout, PredictUnreachable, Predictor
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
predictor = Predictor(simulation_id=0, rendezvous_dir=sys.argv[1])
try:
    for _ in range(2):
        try:
            outputs, version = predictor.predict({"u": np.ones(4, np.float32)}, timeout=10)
        except PredictUnreachable as exc:
            print("UNREACHABLE", isinstance(exc, PredictTimeout), exc, flush=True)
            continue
        print("PREDICTED", outputs["y"].tolist(), version, flush=True)
finally:
    predictor.close()
"""


@linux
def test_a_serve_file_publishes_the_host_and_the_scope(tmp_path: Path) -> None:
    with answering_server(tmp_path) as (server, _):
        entry = json.loads((tmp_path / "serve_0.json").read_text())
    assert entry[HOST_KEY] == socket.gethostname()
    assert entry[SCOPE_KEY] == host_scope.loopback_scope()
    assert out_of_reach(entry["endpoint"], entry, True, SERVING) is None  # (same scope)


@linux
def test_the_serving_words_name_the_serving_socket_and_its_fix() -> None:
    mine = host_scope.loopback_scope()
    assert mine is not None
    boot, _, netns = mine.partition("/")
    entry = {SCOPE_KEY: f"x{boot}/{netns}", HOST_KEY: "gpu01"}
    why = out_of_reach("tcp://127.0.0.1:41233", entry, True, SERVING)
    assert why is not None
    assert why.startswith("the trainer's serving socket published the loopback endpoint ")
    assert f"runs on host {socket.gethostname()!r}, another machine" in why
    assert "ServingHook(bind='tcp://*:*')" in why and "--bind 'tcp://*:*'" in why
    assert "endpoint= or MELISSA_TRAINER_SERVE_ENDPOINTS, are not checked" in why


@linux
@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_predictor_in_another_network_namespace_is_told_at_once(tmp_path: Path) -> None:
    """A real serving socket's serve file read by a predictor in a network namespace of
    its own (``unshare --net``: a loopback of its own, as a compute node's): each request
    raises `PredictUnreachable` (a `PredictTimeout`) before any connection attempt, in
    words naming the serve file, both hosts and the fix, warned of once; the same
    predictor in this namespace gets its predictions (the oracle: ``2 u + VERSION``)."""
    unshare = netns.UNSHARE
    if (why := netns.cannot_unshare()) is not None:
        pytest.skip(why)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_TRAINER_")}
    command = [sys.executable, "-c", PREDICTOR, str(tmp_path)]
    with answering_server(tmp_path) as (server, _):
        away = subprocess.run(
            [unshare, "--net", *command], capture_output=True, text=True, timeout=60, env=env
        )
        here = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    lines = away.stdout.splitlines()
    assert away.returncode == 0 and len(lines) == 2, (away.stdout, away.stderr[-2000:])
    serve_file = tmp_path / "serve_0.json"
    for line in lines:
        assert line.startswith(f"UNREACHABLE True serve file {serve_file}: the trainer's "
                               "serving socket published the loopback endpoint"), line  # fmt: skip
        assert server.endpoint in line and "another network namespace" in line, line
    warnings = [w for w in away.stderr.splitlines() if w.startswith("WARNING Predictor: ")]
    assert len(warnings) == 1 and "another network namespace" in warnings[0], away.stderr
    assert here.returncode == 0, here.stderr[-2000:]
    assert here.stdout.splitlines() == [f"PREDICTED {[2.0 + VERSION] * 4} {VERSION}"] * 2
