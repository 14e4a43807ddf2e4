"""A whole study of the surrogate sampler whose solver fails for good in the corner of
high loss (the user trial: exit 1 wherever eps < 0.003): a real `Launcher`, one job at
a time, no restart, every simulation's loss observed as it is drawn (as a trainer
reports the first samples of a simulation that fails later). Before the sampler kept
failures (`SurrogateSampler.failed`) its acquisitions went back to the corner until the
study ran out of `min_finished_fraction`; now the failures' zones keep its
replacements away."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer.launcher import Launcher, LauncherTuning, SurrogateSampler

pytestmark = [pytest.mark.timeout(240), pytest.mark.e2e]

BOX = {"eps": (1e-3, 1e-1, "log"), "a": (0.0, 1.0)}
N = 12
FAILING = [
    sys.executable,
    "-c",
    "import json, os, sys; p = json.loads(os.environ['MELISSA_TRAINER_PARAMETERS']); "
    "sys.exit(1 if p['eps'] < 0.003 else 0)",
]


def unit(parameters: dict[str, float]) -> np.ndarray:
    return np.array([np.log(parameters["eps"] / 1e-3) / np.log(100.0), parameters["a"]])


def test_a_surrogate_study_stops_drawing_where_the_solver_fails(tmp_path: Path) -> None:
    sampler = SurrogateSampler(BOX, seed=11, exploration=0.0, min_observations=4)
    launcher = Launcher(FAILING, sampler, N, job_limit=1, log_dir=tmp_path / "logs",
                        tuning=LauncherTuning(max_restarts=0, poll_interval=0.01,
                                              min_finished_fraction=0.5))  # fmt: skip
    launcher.start(tmp_path / "rendezvous", study_dir=tmp_path)
    deadline = time.monotonic() + 200.0
    try:
        while not launcher.done:
            launcher.check()  # raises once the study failed (min_finished_fraction)
            # every simulation drawn reports its loss (1/eps: the thin boundary layer is
            # what the surrogate learns worst), the failing ones too, as their first
            # samples would
            launcher.observe({o.simulation_id: 1.0 / o.parameters["eps"]
                              for o in launcher.outcomes()})  # fmt: skip
            assert time.monotonic() < deadline, "the study did not complete"
            time.sleep(0.02)
    finally:
        launcher.stop()
    outcomes = launcher.outcomes()
    failed = [o for o in outcomes if o.status == "failed"]
    summary = launcher.summary()
    assert summary["finished"] == N
    assert sampler.failures == tuple(o.simulation_id for o in failed)
    # before the zones: 7 of the first 9 draws failed and the study stopped; with them
    # each failure's zone moves the edge along the failing boundary: 6 here (the 6 the
    # study allows) at risk 1/2, 4 with the risk rule (`launcher.failed_zones`)
    assert len(failed) <= N // 2, [o.parameters for o in failed]
    # no draw after a failure lands within `avoid` of it
    for f in failed:
        later = [o for o in outcomes if o.simulation_id > f.simulation_id]
        gaps = [float(np.linalg.norm(unit(o.parameters) - unit(f.parameters))) for o in later]
        assert min(gaps, default=1.0) >= sampler.avoid, (f.parameters, gaps)
