"""The C client's `mt_predict` through a serve file that publishes a loopback serving
endpoint of another machine, or of another network namespace, fails each request at
once in the Python `Predictor`'s words (`PredictUnreachable`, a `PredictTimeout`:
client/predict_lookup.py `unreachable`, tests/client/test_predict_host_scope.py), its
setter the C client's: `MT_ETIMEDOUT` (what a simulation's fallback takes, as Python's
subclass of `PredictTimeout`), said on stderr once (clients/c/src/host_scope.c).

Before the fix the request dialled the endpoint (nothing listens there: its own
loopback) and said the trainer was gone or restarting.

No trainer: a serve file written by hand (`write_serving`), its scope another's.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from predict_runs import CPredict
from predict_script import MT_ETIMEDOUT, status

from melissa_trainer.client.predict import Predictor
from melissa_trainer.client.predict_errors import PredictUnreachable
from melissa_trainer.stream import host_scope
from melissa_trainer.stream.host_scope import SCOPE_KEY
from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.e2e  # every test here starts a process

#: longer than the test's own timeout: a request that waits for it fails the test
LONG = 120


def python_words(rendezvous: Path, sim: int) -> str:
    """The Python `Predictor`'s message for the same serve file, in the C client's names."""
    with (
        Predictor(sim, rendezvous_dir=rendezvous) as predictor,
        pytest.raises(PredictUnreachable) as raised,
    ):
        predictor.predict({"u": np.zeros(4, np.float32)}, timeout=LONG)
    python = "endpoint= or MELISSA_TRAINER_SERVE_ENDPOINTS"
    words = str(raised.value)
    assert python in words, words  # (the mapping still fits Python's words)
    return words.replace(python, "mt_set_serve_endpoints or MELISSA_TRAINER_SERVE_ENDPOINTS")


@pytest.mark.skipif(host_scope.loopback_scope() is None, reason="the scope is read from /proc")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["machine", "namespace", "host name"])
def test_a_serve_file_out_of_reach_fails_at_once_in_pythons_words(
    c_predict: CPredict, tmp_path: Path, where: str
) -> None:
    boot, _, netns = str(host_scope.loopback_scope()).partition("/")
    endpoint = "tcp://127.0.0.1:1"
    if where == "host name":  # (`tcp://*:*` publishes it; /etc/hosts may map it to loopback)
        endpoint = f"tcp://{socket.gethostname()}:1"
        if host_scope._loopback_name(endpoint) is None:
            pytest.skip(f"{socket.gethostname()!r} does not resolve to loopback only here")
    path = write_serving(tmp_path, 0, 1, endpoint, field_specs({"u": ((4,), "float32")}),
                         None, None)  # fmt: skip
    entry = json.loads(path.read_text())
    entry[SCOPE_KEY] = f"x{boot}/{netns}" if where == "machine" else f"{boot}/x{netns}"
    path.write_text(json.dumps(entry))
    env = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
    with c_predict.script(env) as script:
        asked = [script.send(f"predict {LONG}") for _ in range(2)]
        lines, stderr = script.finish()
    words = python_words(tmp_path, 7)
    assert words.startswith(f"serve file {path}: the trainer's serving socket published")
    assert "another machine" in words if where == "machine" else "network namespace" in words
    for n in asked:  # (both at once: the second looks at the file again)
        assert status(lines, n) == (MT_ETIMEDOUT, words), lines[n]
    said = [line for line in stderr.splitlines() if "serving socket published" in line]
    assert said == [f"melissa_trainer: mt_predict: {words}"], stderr
