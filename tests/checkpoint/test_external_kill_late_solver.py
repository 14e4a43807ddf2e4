"""External mode, a trainer of two ranks killed and resumed, and a solver started on the
printed start line between the two, as a user's job would: before the resumed trainer's
receivers publish, so that the first thing it meets in the rendezvous directory (kept
on a resume: examples/study_common.py `prepare_rendezvous`) is the killed run's rank
files, their endpoints dead and never marked stopped.

What a user sees, asserted here: that solver waits past the dead run's files, saying
so (its rank files' trainer is gone: `stream.trainer_process`), streams to the resumed
run and exits 0; the solvers that were streaming follow the resumed trainer and exit 0;
the resumed trainer ends the study (exit 0); every (simulation, time step) is trained on
exactly once in the lineage of the final state (the first run's steps up to the
checkpoint resumed from, then the resumed run's, both ranks'). Never a solver streaming
to a dead endpoint for ever, never a silent loss.

Real parts: `accelerate launch` with two ranks (gloo, no GPU) of the heat example
(tests/scripts/heat_lineage.py), its solvers (examples/heat_pde/solver.py), a real
SIGKILL of the trainer's process group. The solvers are stopped (SIGSTOP) across the
restart, the late one once it said it met the dead run's files, and continued once
the resumed trainer has published itself: what they meet does not depend on how long
the trainer takes to start on a loaded machine.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from compiled import c_client  # noqa: F401 (a fixture, asked for by the C case)
from held_ports import held_port
from process_tree import kill_tree
from test_external_resume import DRIVER, FLAGS, STEPS, Study
from test_external_resume_c import CStudy, c_solver
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGSTOP"),
]

SIMULATIONS = 3  # (FLAGS' --num_simulations: 0 and 1 stream, 2 starts late)
LATE = 2
#: what the late solver's wait says of the killed run's rank files (trainer_process.py)
GONE = "is gone without marking it stopped"


class TwoRanks(Study):
    """`Study` with its trainers under `accelerate launch` on two ranks."""

    def trainer(self, name: str, *extra: str, pace: float) -> subprocess.Popen[str]:
        env = {**self.env, "LINEAGE_LOG": str(self.tmp / f"{name}.lineage")}
        env["STEP_SLEEP"] = str(pace)
        launch = ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                  "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                  "--main_process_port", str(held_port())]  # fmt: skip
        args = [*launch, str(DRIVER), *FLAGS, "--output_dir", str(self.out), *extra]
        return self._start(name, args, env)

    #: the late solver's program (a compiled C client), None: the Python solver
    late_exe: Path | None = None

    def late_solver(self, simulation: int) -> subprocess.Popen[str]:
        """The solver started late, named ``late``: the Python one or `late_exe`."""
        if self.late_exe is None:
            return self.solver(simulation, "late")
        c_study = CStudy(self.tmp, self.late_exe)
        proc = c_study.solver(simulation, "late")
        self.procs.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.procs:  # (the ranks too: not in the launcher's process group)
            if proc.poll() is None:
                kill_tree(proc.pid)
        super().cleanup()


@pytest.fixture
def study(tmp_path: Path) -> Iterator[TwoRanks]:
    made = TwoRanks(tmp_path)
    try:
        yield made
    finally:
        made.cleanup()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("client", ["python", "c"])
def test_a_solver_started_before_the_resumed_trainer_publishes_streams_to_it(
    study: TwoRanks, request: pytest.FixtureRequest, tmp_path: Path, client: str
) -> None:
    """`client`: the late solver's, the heat example's Python solver or a C program
    (test_external_resume_c.py's, its words the same: clients/c/src/rendezvous.c)."""
    if client == "c":
        exe = c_solver(request.getfixturevalue("c_client"), tmp_path)
        study.late_exe = exe
    first = study.trainer("first", pace=0.12)
    wait_until(lambda: study.run_id() is not None, "the trainer's rendezvous", 300.0, procs=[first])
    old_run = study.run_id()
    early = [study.solver(i, "solver", SOLVER_STEP_SLEEP="0.2") for i in range(LATE)]
    wait_until(
        lambda: bool(study.checkpoints()) and len(study.steps("first")) >= 6,
        "a checkpoint",
        300.0,
        procs=[first],
    )
    assert all(s.poll() is None for s in early), "the solvers ended before the kill"
    for s in early:
        os.kill(s.pid, signal.SIGSTOP)  # (continued once the resumed trainer is there)
    # (accelerate and both ranks, each in a session of its own, as a node lost: the
    # launcher killed alone, its ranks stop cleanly, their files marked stopped)
    kill_tree(first.pid)
    first.wait(60)
    assert (study.rendezvous / "rank_1.json").exists()  # (the leftovers it meets)
    late = study.late_solver(LATE)
    wait_until(lambda: GONE in study.output(f"late-{LATE}"), "the late solver's wait", 120.0)
    os.kill(late.pid, signal.SIGSTOP)
    resumed = study.trainer("resumed", "--resume_from_checkpoint", "latest", pace=0.0)
    wait_until(
        lambda: study.run_id() not in (None, old_run),
        "the resumed trainer's rendezvous",
        300.0,
        procs=[resumed],
    )
    new_run = study.run_id()
    for s in [*early, late]:
        os.kill(s.pid, signal.SIGCONT)
    codes = [s.wait(300) for s in [*early, late]]
    said = [study.output(f"solver-{i}") for i in range(LATE)] + [study.output(f"late-{LATE}")]
    assert codes == [0] * SIMULATIONS, [s[-1500:] for s in said]
    for i in range(LATE):
        assert f"followed the restarted trainer (run {new_run}" in said[i], said[i][-1500:]
    assert resumed.wait(300) == 0, study.output("resumed")[-3000:]
    assert_each_step_trained_once(study)


def assert_each_step_trained_once(study: TwoRanks) -> None:
    """Every (simulation, time step) trained on exactly once over both ranks: the first
    run's steps up to the checkpoint resumed from, then the resumed run's."""
    lines = [line for line in study.output("resumed").splitlines() if '"resumed_from"' in line]
    assert lines, study.output("resumed")[-3000:]
    base = int(Path(json.loads(lines[-1])["resumed_from"]).name.split("-")[1])
    resumed = study.steps("resumed")
    assert resumed and min(step for step, _ in resumed) == base + 1
    trained = [k for step, keys in study.steps("first") if step <= base for k in keys]
    trained += [k for _, keys in resumed for k in keys]
    counts = collections.Counter(trained)
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    assert {k for k, n in counts.items() if n > 1} == set(), "trained on twice"
    assert expected - set(counts) == set(), "never trained on"
    assert set(counts) == expected
