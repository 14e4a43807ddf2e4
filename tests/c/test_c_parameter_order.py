"""C solvers listing their parameters in another order than the study's
(``MELISSA_TRAINER_PARAMETERS``'s order, which `mt_set_parameter` keeps, and the HELLO
too) into a real `Receiver` given the study's names: every sample's ``parameters``
vector is in the study's order (`stream.schema`). Oracle: the value each name was
given in the solver's environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from c_driver import Scenario, c_script, run_script, script_exe  # noqa: F401 (fixture)
from compiled import c_client  # noqa: F401
from helpers import drain, running

from melissa_trainer.buffers import FIFOBuffer

pytestmark = pytest.mark.e2e  # every test here starts a process

#: simulation id -> its parameters, in the order its solver lists them
GIVEN = {3: {"b": 0.5, "a": 3.0}, 4: {"a": 4.0, "b": 0.25}}  # 4: the study's order


@pytest.mark.timeout(60)
def test_c_solvers_in_either_order_give_vectors_in_the_studys(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    fields = [("u", 1, (3,))]
    buf = FIFOBuffer(100)
    rv = tmp_path / "rv"
    with running(buf, expected_simulations=2, rendezvous_dir=str(rv), parameters=("a", "b")):
        results = []
        for sim, given in GIVEN.items():
            s = Scenario(fields=fields, steps=[0, 1], simulation_id=sim, receivers=1)
            script = c_script(s, ["unused://"]).replace("endpoints unused://\n", "")
            script = script.replace(f"id {sim}\n", "").replace("param", "#param")
            env = {
                "MELISSA_TRAINER_SIMULATION_ID": str(sim),
                "MELISSA_TRAINER_RENDEZVOUS": str(rv),
                "MELISSA_TRAINER_PARAMETERS": json.dumps(given),
            }
            results.append(run_script(script_exe, script, tmp_path, env))
        samples = drain(buf)
    for result in results:
        assert all(status == 0 for status, _ in result.values()), result
    vectors = sorted((int(s["simulation_id"]), s["parameters"].tolist()) for s in samples)
    assert vectors == [(sim, [g["a"], g["b"]]) for sim, g in GIVEN.items() for _ in (0, 1)]
