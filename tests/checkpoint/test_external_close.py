"""A trainer killed at the moment a solver closes (external mode): the solver's BYE has
left it, but the trainer has not read it, and dies. PUSH/PULL acknowledges nothing, so
the close must not count that BYE as delivered: it returns only once a live receiver
confirms it (`melissa_trainer.client.confirm`), here the resumed trainer's, after the
solver followed it and sent again, from its replay window, what its checkpoint lacks.

The moment is made exact, not timed: the trainer trains two steps (the solver's first 8
time steps), writes checkpoint-2 and then holds (``LINEAGE_HOLD``: no step is trained,
its buffer fills, its receiver stops reading); the solver sends its other steps and
closes; the test kills the trainer (SIGKILL) once the solver's transport has released
its sockets (the BYE left: `closing.close_transport` waits for it first), then resumes
it. The oracle: the solver exits 0 only if every (simulation, time step) is trained on
exactly once across both runs (the first run's steps up to checkpoint-2, then the
resumed run's). Before the fix the solver exited 0 at once and the resumed trainer named
the simulation unfinished: its last steps were lost.
"""

from __future__ import annotations

import collections
import json
import signal
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

STEPS, FIRST = 48, 8  # (the solver sends FIRST steps, then the rest once the trainer holds)
FLAGS = [
    "--external", "--num_simulations", "1", "--time_steps", str(STEPS),
    "--grid_size", "6", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "8", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", "4", "--save_steps", "2",
    "--logging_steps", "5", "--eval_steps", "none", "--disable_progress_bar",
    "--stop_sync_steps", "1", "--json",
]  # fmt: skip

SOLVER = """
import json, os, sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client, transport

marks, steps, first = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
release = transport.Transport.release

def marked(self, linger_ms):  # (the first release is the close's: its BYE has left)
    (marks / "bye-left").touch()
    release(self, linger_ms)

transport.Transport.release = marked
with Client(fields={"temperature": ((6, 6), "float32")}, parameters=json.loads(sys.argv[4]),
            simulation_id=0) as client:
    for t in range(steps):
        if t == first:
            (marks / "sent").touch()
            while not (marks / "go").exists():  # (the trainer holds from now on)
                time.sleep(0.01)
        client.send(t, temperature=np.full((6, 6), t, np.float32))
print("closed", flush=True)
"""


@pytest.mark.timeout(600)
def test_a_trainer_killed_as_the_solver_closes_loses_nothing(tmp_path: Path) -> None:
    study = Study(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    hold = tmp_path / "hold"
    try:
        env = {**study.env, "LINEAGE_LOG": str(tmp_path / "first.lineage"),
               "LINEAGE_HOLD": str(hold), "LINEAGE_HOLD_SECONDS": "600"}  # fmt: skip
        args = [str(DRIVER), *FLAGS, "--output_dir", str(study.out)]
        first = study._start("first", args, env)
        wait_until(lambda: study.run_id() is not None, "the trainer's rendezvous", 180.0)
        old_run = study.run_id()
        solver_env = {**study.env, "MELISSA_TRAINER_RENDEZVOUS": str(study.rendezvous)}
        script = tmp_path / "solver.py"
        script.write_text(SOLVER)
        solver = study._start(
            "solver",
            [str(script), str(marks), str(STEPS), str(FIRST), json.dumps(PARAMETERS)],
            solver_env,
        )
        wait_until(lambda: (marks / "sent").exists(), "the solver's first steps", 180.0)
        wait_until(lambda: "checkpoint-2" in study.checkpoints(), "checkpoint-2", 180.0)
        hold.touch()  # (the trainer trains nothing more: its buffer fills, then its queues)
        (marks / "go").touch()
        wait_until(lambda: (marks / "bye-left").exists(), "the solver's BYE to leave", 180.0)
        first.send_signal(signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL
        hold.unlink()
        env = {**study.env, "LINEAGE_LOG": str(tmp_path / "resumed.lineage")}
        resumed = study._start(
            "resumed", [*args, "--resume_from_checkpoint", "latest"], env
        )  # fmt: skip
        wait_until(lambda: study.run_id() not in (None, old_run), "the resumed trainer", 180.0)
        # Either the resumed trainer ends (the simulation finished) or it names the
        # simulation unfinished (it waits for steps the solver no longer has)
        wait_until(
            lambda: resumed.poll() is not None or "unfinished: " in study.output("resumed"),
            "the resumed trainer's end or its notice",
            300,
        )
        code = solver.wait(60)
        said = study.output("solver")
        assert "unfinished: " not in study.output("resumed"), (
            f"the solver exited {code} and the resumed trainer waits for it: "
            f"{study.output('resumed')[-1500:]}\nsolver: {said[-1500:]}"
        )
        assert resumed.wait(120) == 0, study.output("resumed")[-3000:]
        assert code == 0, said[-3000:]
        assert "followed the restarted trainer" in said, said[-3000:]
        assert_trained_once(study)
    finally:
        study.cleanup()


def assert_trained_once(study: Study) -> None:
    """Every (0, t) trained exactly once: the first run's steps up to the checkpoint
    the resumed run started from, then the resumed run's."""
    summary = json.loads(study.output("resumed").strip().splitlines()[-1])
    base = int(Path(summary["resumed_from"]).name.split("-")[1])
    keys = [k for step, ks in study.steps("first") if step <= base for k in ks]
    keys += [k for _, ks in study.steps("resumed") for k in ks]
    counts = collections.Counter(keys)
    assert {k for k, n in counts.items() if n > 1} == set(), "trained on twice"
    assert set(counts) == {(0, t) for t in range(STEPS)}, sorted(counts)
