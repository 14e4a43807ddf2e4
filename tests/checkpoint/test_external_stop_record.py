"""A trainer that stops as an external solver closes (the heat example with
``--external``, a solver started by the test as a user's own would be): its receivers'
stop record answers the close (`melissa_trainer.stream.stop_record`,
`melissa_trainer.client.stopped`).

* The study's end: the trainer ingests the solver's last BYE, ends (its stream over)
  and stops before the solver's first RECEIPT_QUERY. The moment is made exact, not
  timed: the solver's first question (`Rounds.wait`) waits until the rendezvous file
  says stopped. The close is confirmed from the record; the solver exits 0 and every
  (simulation, time step) is trained on exactly once (the trainer's lineage). The
  solver's first question also waits for the trainer's process to end (a file the test
  writes then): its follow socket is closed, only the record can answer. Before
  the fix it waited ``disconnected_timeout`` + ``follow_timeout`` and failed, "not
  confirmed".
* ``--nonfinite fail``: the solver sends NaN at one time step, the trainer stops on it;
  the solver fails (non-zero) with an error naming the time step, the policy and the fix,
  at once. Before the fix: "the trainer died, or its node" after its waits (shortened
  here to keep the failing run short).
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import pytest
from test_external_resume import DRIVER, PARAMETERS, Study
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups"),
]

STEPS = 12
FLAGS = [
    "--external", "--num_simulations", "1", "--time_steps", str(STEPS),
    "--grid_size", "6", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "16", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", "4", "--save_steps", "100",
    "--logging_steps", "5", "--eval_steps", "none", "--disable_progress_bar",
    "--stop_sync_steps", "1", "--json",
]  # fmt: skip

SOLVER = """
import json, sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client, ClientTuning, receipts

rank0, steps, nan_at = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
plain = receipts.Rounds.wait

def wait(self, *args, **kwargs):  # (the first question waits until the trainer stopped,
    # and its process ended: its follow socket is closed too)
    gone = rank0.parent.parent / "trainer-exited"
    while json.loads(rank0.read_text()).get("stopped") is not True or not gone.exists():
        time.sleep(0.01)
    return plain(self, *args, **kwargs)

receipts.Rounds.wait = wait
tuning = ClientTuning(disconnected_timeout=20.0, follow_timeout=5.0)
with Client(fields={"temperature": ((6, 6), "float32")}, parameters=json.loads(sys.argv[4]),
            simulation_id=0, tuning=tuning) as client:
    for t in range(steps):
        value = np.nan if t == nan_at else t
        client.send(t, temperature=np.full((6, 6), value, np.float32))
print("closed", flush=True)
"""


def start(study: Study, tmp: Path, nan_at: int, *extra: str) -> tuple[object, object]:
    env = {**study.env, "LINEAGE_LOG": str(tmp / "trainer.lineage")}
    trainer = study._start(
        "trainer", [str(DRIVER), *FLAGS, "--output_dir", str(study.out), *extra], env
    )
    wait_until(lambda: study.run_id() is not None, "the trainer's rendezvous", 180.0)
    script = tmp / "solver.py"
    script.write_text(SOLVER)
    solver_env = {**study.env, "MELISSA_TRAINER_RENDEZVOUS": str(study.rendezvous)}
    args = [str(study.rendezvous / "rank_0.json"), str(STEPS), str(nan_at)]
    solver = study._start("solver", [str(script), *args, json.dumps(PARAMETERS)], solver_env)
    return trainer, solver


@pytest.mark.timeout(300)
def test_a_trainer_that_ends_before_the_first_question_confirms_the_close(
    tmp_path: Path,
) -> None:
    study = Study(tmp_path)
    try:
        trainer, solver = start(study, tmp_path, -1)
        assert trainer.wait(240) == 0, study.output("trainer")[-3000:]  # type: ignore[attr-defined]
        (study.out / "trainer-exited").touch()
        code = solver.wait(120)  # type: ignore[attr-defined]
        said = study.output("solver")
        assert code == 0 and "closed" in said, said[-3000:]
        record = json.loads((study.rendezvous / "rank_0.json").read_text())["stop_record"]
        assert record["reason"]["code"] == "end" and record["finished"] == [[0, STEPS, 0]]
        counts = collections.Counter(k for _, ks in study.steps("trainer") for k in ks)
        assert set(counts) == {(0, t) for t in range(STEPS)}, sorted(counts)
        assert max(counts.values()) == 1, "trained on twice"
    finally:
        study.cleanup()


@pytest.mark.timeout(300)
def test_a_nan_that_stops_the_trainer_fails_the_solver_naming_it(tmp_path: Path) -> None:
    study = Study(tmp_path)
    try:
        trainer, solver = start(study, tmp_path, 3, "--nonfinite", "fail")
        assert trainer.wait(120) != 0, study.output("trainer")[-3000:]  # type: ignore[attr-defined]
        (study.out / "trainer-exited").touch()
        code = solver.wait(120)  # type: ignore[attr-defined]
        said = study.output("solver")
        assert code not in (0, None), said[-3000:]
        assert "SimulationRefused" in said and "stopped on its time step 3" in said, said[-3000:]
        assert "nonfinite='fail'" in said and "--nonfinite refuse" in said, said[-3000:]
        record = json.loads((study.rendezvous / "rank_0.json").read_text())["stop_record"]
        assert (record["reason"]["code"], record["reason"]["time_step"]) == ("nonfinite", 3)
    finally:
        study.cleanup()
