"""The surrogate served back to running simulations through a real trainer (issue 47):
a study of simulation processes that stream samples and, every few steps, ask the
trainer's current model for a prediction (`Client.predict`), with the `ServingHook`;
on one rank, and on two under `accelerate launch` (each rank serves the simulations
``id % 2`` routed to it).

Oracle, independent of the serving path: a hook records the model's weights at every
step end (and before the first step); each answer must be the linear model of the
version it names applied to the request's inputs. The in-process API is held to the
same oracle, from a hook (the training thread) and from another thread.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from held_ports import held_port
from process_tree import run_group
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

SIMULATIONS, STEPS, ASK_EVERY = 2, 60, 10


class InProcess(Hook):
    """Asks the serving hook from a hook (training thread) and from a thread of its own."""

    def __init__(self, serving: ServingHook) -> None:
        self.serving = serving
        self.from_hook: list[tuple[np.ndarray, Any]] = []
        self.from_thread: list[tuple[np.ndarray, Any]] = []
        self.thread: threading.Thread | None = None

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == 5:
            x = np.array([0.5, -0.5, 1.0], np.float32)
            self.from_hook.append((x, self.serving.predict({"x": x})))

            def ask() -> None:
                x2 = np.array([1.0, 2.0, 3.0], np.float32)
                self.from_thread.append((x2, self.serving.predict({"x": x2}, timeout=60)))

            self.thread = threading.Thread(target=ask)
            self.thread.start()


def test_simulations_get_the_model_of_the_version_they_are_told(tmp_path: Path) -> None:
    command = python_simulation(tmp_path / "sim.py", STEPS, ASK_EVERY)
    serving = serving_hook()
    weights, in_process = Weights(), InProcess(serving)
    trainer, _ = serving_study(tmp_path, command, SIMULATIONS, [weights, serving, in_process])
    state = trainer.train()
    assert in_process.thread is not None
    in_process.thread.join(timeout=60)
    assert state.global_step == SIMULATIONS * STEPS  # every sample trained on once

    versions_seen = []
    for sid in range(SIMULATIONS):
        record = json.loads((tmp_path / f"sim{sid}.json").read_text())
        assert len(record["answers"]) == STEPS // ASK_EVERY
        assert set(record["refusals"]) <= {"not_serving"}
        versions = [a["version"] for a in record["answers"]]
        assert versions == sorted(versions)  # a simulation never sees an older model
        for answer in record["answers"]:
            expected = linear(weights.by_version[answer["version"]], np.array(answer["x"]))
            np.testing.assert_allclose(answer["y"], expected, rtol=1e-5, atol=1e-6)
        versions_seen += versions
    assert max(versions_seen) > 0  # trained models were served, not only the initial one

    ((x, (outputs, version)),) = in_process.from_hook
    assert version == 5
    np.testing.assert_allclose(outputs["y"], linear(weights.by_version[5], x), rtol=1e-5)
    ((x2, (outputs2, version2)),) = in_process.from_thread
    assert version2 >= 5
    np.testing.assert_allclose(outputs2["y"], linear(weights.by_version[version2], x2), rtol=1e-5)

    counts = serving.telemetry()
    assert counts["answered"] == SIMULATIONS * (STEPS // ASK_EVERY) + 1  # + the thread's
    assert not (tmp_path / "out" / "rendezvous" / "serve_0.json").exists()


SCRIPT = Path(__file__).parents[1] / "scripts" / "serving_study.py"


@pytest.mark.timeout(240)
def test_each_rank_serves_its_simulations(tmp_path: Path) -> None:
    """Two ranks (gloo on CPU): both publish a serve file; simulation `id` is answered
    by rank ``id % 2`` (its counters), with the model of the version it names (the
    ranks' replicas are equal at every version)."""
    n = 4
    script = Path(python_simulation(tmp_path / "sim.py", STEPS, ASK_EVERY)[1])
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(held_port()),
           str(SCRIPT), str(tmp_path), str(script), str(n)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    proc = run_group(cmd, timeout=220, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    for r in ranks:
        files = {f["rank"]: f for f in r["serve_files"]}
        assert sorted(files) == [0, 1] and {f["world_size"] for f in files.values()} == {2}
        assert files[0]["endpoint"] != files[1]["endpoint"]
    weights = [
        {int(v): (np.array(w[0], np.float32).reshape(1, 3), np.array(w[1], np.float32))
         for v, w in r["weights"].items()}
        for r in ranks
    ]  # fmt: skip
    for version in set(weights[0]) & set(weights[1]):
        np.testing.assert_array_equal(weights[0][version][0], weights[1][version][0])
    answered = [0, 0]
    for sid in range(n):
        record = json.loads((tmp_path / f"sim{sid}.json").read_text())
        assert len(record["answers"]) == STEPS // ASK_EVERY
        assert set(record["refusals"]) <= {"not_serving"}
        for answer in record["answers"]:
            expected = linear(weights[sid % 2][answer["version"]], np.array(answer["x"]))
            np.testing.assert_allclose(answer["y"], expected, rtol=1e-5, atol=1e-6)
        answered[sid % 2] += len(record["answers"])
    assert [r["telemetry"]["answered"] for r in ranks] == answered
    # the logs carry the serving counters summed over the ranks, the same on both
    assert ranks[0]["logged"] == ranks[1]["logged"]
    logged = ranks[0]["logged"]
    assert logged["serving_answered"] == sum(answered)
    assert logged["serving_requests"] == sum(r["telemetry"]["requests"] for r in ranks)
    assert logged["serving_batches"] == sum(r["telemetry"]["batches"] for r in ranks)
    assert logged["serving_latency_steps_p99"] == max(
        r["telemetry"]["latency_steps_p99"] for r in ranks
    )
