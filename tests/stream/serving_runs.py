"""What the serving channel's tests with real client processes share (test_serving_*.py):
`run_client`, which runs code in a fresh interpreter (a simulation) that prints one JSON
line, and `PREDICTING`, such a client: a `Predictor` that asks N predictions and prints
what came back and what it caught. The fixture `server` (a `PredictServer` on `INPUTS`,
``max_queue=4``) is in conftest.py.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from process_tree import run_group


def run_client(code: str, tmp_path: Path, timeout: float = 60.0, **env: str) -> dict:
    """Run `code` in a fresh interpreter (a simulation); it prints one JSON line."""
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(code))
    environment = {**os.environ, **env}
    done = run_group([sys.executable, str(script)], timeout=timeout, env=environment)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


PREDICTING = """
import json, os, sys
import numpy as np
from melissa_trainer.client import Predictor, PredictionUnavailable, PredictRefused, PredictTimeout

caught = []
results = []
with Predictor(int(os.environ["SIM"]), run_id=os.environ.get("RUN")) as p:
    for i in range(int(os.environ["N"])):
        u = np.arange(4, dtype=np.float32) + i
        try:
            out, version = p.predict({"u": u}, timeout=float(os.environ["TIMEOUT"]))
            results.append({"u": u.tolist(), "y": out["y"].tolist(), "version": version})
        except PredictRefused as exc:
            caught.append(["refused", exc.reason])
        except PredictTimeout as exc:
            caught.append(["timeout", str(exc)])
print(json.dumps({"results": results, "caught": caught}))
"""
