"""External mode across a trainer restart: the heat example with ``--external``, its
solvers started by the test as a user's own job would, the trainer preempted (SIGTERM:
a checkpoint, exit 143) while they stream, then resumed (``--resume_from_checkpoint
latest``).

What a user sees, asserted here:

* the running solvers follow the resumed trainer (it binds new ports and rewrites the
  rendezvous with a new run id): each asks it which of its steps the checkpoint holds,
  sends the others again from its replay window, and exits 0
  (`melissa_trainer.client.follow`), after a SIGTERM (a checkpoint, exit 143) or a
  SIGKILL (the last checkpoint is older);
* without a replay window (``MELISSA_TRAINER_REPLAY_BYTES=0``; the C and Fortran
  clients' version of these tests: test_external_resume_c.py) they do not follow: what
  they sent after its checkpoint is lost, and each fails, its error saying that the
  trainer was restarted and to run the simulation again with the same simulation id
  (`melissa_trainer.client.restart`);
* the resumed trainer, waiting for data, names the simulations its checkpoint holds
  unfinished (`stream_source.no_data_notice`, after `FIRST_DATA_NOTICE` s);
* run again with the same ids, those simulations complete the study, and every
  (simulation, time step) is trained on exactly once in the lineage of the final state:
  the first run's steps up to the checkpoint resumed from, then the resumed run's (the
  receivers' record, in the checkpoint, drops the steps it holds as duplicates).

The solvers are stopped (SIGSTOP) across the restart and continued once the resumed
trainer has published itself, so that what they meet does not depend on how long the
trainer takes to start on a loaded machine.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGSTOP"),
]

ROOT = Path(__file__).parents[2]
DRIVER = ROOT / "tests" / "scripts" / "heat_lineage.py"
SOLVER = ROOT / "examples" / "heat_pde" / "solver.py"
TAMPERED = ROOT / "tests" / "scripts" / "tampered_solvers"  # SOLVER_STEP_SLEEP and the rest
SIMULATIONS, STEPS, BATCH = 3, 40, 4
PARAMETERS = {"t_initial": 300, "t_left": 200, "t_right": 400, "t_bottom": 300, "t_top": 250}
FLAGS = [
    "--external", "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS),
    "--grid_size", "6", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "16", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", str(BATCH), "--save_steps", "4",
    "--logging_steps", "5", "--eval_steps", "none", "--disable_progress_bar",
    "--stop_sync_steps", "2", "--json",
]  # fmt: skip


class Study:
    """The processes of one external-mode study in `tmp`: trainers and solvers."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.out = tmp / "out"
        self.rendezvous = self.out / "rendezvous"
        self.procs: list[subprocess.Popen[str]] = []
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
        for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID"):
            self.env.pop(name, None)

    def trainer(self, name: str, *extra: str, pace: float) -> subprocess.Popen[str]:
        env = {**self.env, "LINEAGE_LOG": str(self.tmp / f"{name}.lineage")}
        env["STEP_SLEEP"] = str(pace)
        return self._start(name, [str(DRIVER), *FLAGS, "--output_dir", str(self.out), *extra], env)

    def solver(self, simulation: int, name: str, **env: str) -> subprocess.Popen[str]:
        path = os.pathsep.join(filter(None, [str(TAMPERED), os.environ.get("PYTHONPATH")]))
        env = {**self.env, "PYTHONPATH": path, "MELISSA_TRAINER_SIMULATION_ID": str(simulation),
               **env}  # fmt: skip
        args = [str(SOLVER), "--grid_size", "6", "--time_steps", str(STEPS),
                "--parameters", json.dumps(PARAMETERS),
                "--rendezvous", str(self.rendezvous)]  # fmt: skip
        return self._start(f"{name}-{simulation}", args, env)

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        with open(self.tmp / f"{name}.out", "w") as log:
            proc = subprocess.Popen(
                [sys.executable, *args],
                cwd=self.tmp,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # (its own group: the cleanup kills it whole)
            )
        self.procs.append(proc)
        return proc

    def output(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text()

    def run_id(self) -> str | None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            return str(json.loads((self.rendezvous / "rank_0.json").read_text())["run_id"])
        return None

    def steps(self, name: str) -> list[tuple[int, list[tuple[int, int]]]]:
        """(step, [(simulation, time step), ...]) of each step trained by run `name`."""
        path = self.tmp / f"{name}.lineage"
        lines = path.read_text().split("\n")[:-1] if path.exists() else []
        out = []
        for line in lines:
            step, *keys = line.split()
            out.append((int(step), [(int(k.split(":")[0]), int(k.split(":")[1])) for k in keys]))
        return out

    def checkpoints(self) -> list[str]:
        root = self.out / "checkpoints"
        return sorted(p.name for p in root.glob("checkpoint-*")) if root.exists() else []

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def study(tmp_path: Path) -> Iterator[Study]:
    made = Study(tmp_path)
    try:
        yield made
    finally:
        made.cleanup()


def preempt_while_solvers_stream(
    study: Study, stop: signal.Signals = signal.SIGTERM, **solver_env: str
) -> tuple[list[subprocess.Popen[str]], str]:
    """Start the trainer and its solvers, stop the trainer (`stop`: SIGTERM, a
    checkpoint and exit 143; SIGKILL) while they stream (they are stopped first), resume
    it, and continue them once it has published itself. Returns the first solvers
    (running on) and the resumed trainer's run id."""
    first = study.trainer("first", pace=0.12)
    wait_until(lambda: study.run_id() is not None, "the trainer's rendezvous", 180.0)
    old_run = study.run_id()
    solvers = [
        study.solver(
            i, "solver", SOLVER_STEP_SLEEP="0.2", SOLVER_DISCONNECTED_TIMEOUT="2", **solver_env
        )
        for i in range(SIMULATIONS)
    ]
    wait_until(
        lambda: bool(study.checkpoints()) and len(study.steps("first")) >= 6, "a checkpoint", 180.0
    )
    assert all(s.poll() is None for s in solvers), "the solvers ended before the preemption"
    for s in solvers:
        os.kill(s.pid, signal.SIGSTOP)  # (continued once the resumed trainer is there)
    first.send_signal(stop)
    expected = 143 if stop == signal.SIGTERM else -signal.SIGKILL
    assert first.wait(120) == expected, study.output("first")[-3000:]
    study.trainer("resumed", "--resume_from_checkpoint", "latest", pace=0.0)
    wait_until(
        lambda: study.run_id() not in (None, old_run), "the resumed trainer's rendezvous", 180.0
    )
    new_run = study.run_id()
    assert new_run is not None
    for s in solvers:
        os.kill(s.pid, signal.SIGCONT)
    return solvers, new_run


@pytest.mark.timeout(600)
def test_simulations_run_again_after_a_restart_are_trained_on_exactly_once(study: Study) -> None:
    # without a replay window (MELISSA_TRAINER_REPLAY_BYTES=0) a running solver does
    # not follow: it fails, saying to run it again
    solvers, new_run = preempt_while_solvers_stream(study, MELISSA_TRAINER_REPLAY_BYTES="0")
    for i, s in enumerate(solvers):
        assert s.wait(120) == 1, study.output(f"solver-{i}")[-3000:]
        said = study.output(f"solver-{i}")
        assert f"now names run {new_run}" in said, said[-3000:]
        assert f"with the same simulation id (MELISSA_TRAINER_SIMULATION_ID={i})" in said, said
    # the resumed trainer, waiting for data, names the simulations to run again: those
    # run again (only those) must complete the study
    wait_until(
        lambda: "unfinished: " in study.output("resumed"), "the resumed trainer's notice", 180.0
    )
    notice = study.output("resumed").split("unfinished: ")[1].split(".")[0]
    named = [int(i) for i in notice.split(", ")]
    assert named and set(named) <= set(range(SIMULATIONS)), notice
    assert "with the same MELISSA_TRAINER_SIMULATION_ID" in study.output("resumed")
    again = [study.solver(i, "again") for i in named]
    resumed = study.procs[SIMULATIONS + 1]
    assert resumed.wait(300) == 0, study.output("resumed")[-3000:]
    assert [s.wait(60) for s in again] == [0] * len(named)
    assert_each_step_trained_on_once(study)


def assert_each_step_trained_on_once(study: Study) -> None:
    """Every (simulation, time step) trained on exactly once in the lineage of the final
    state: the first run's steps up to the checkpoint resumed from, then the resumed
    run's (whose first step is the next one)."""
    summary = json.loads(study.output("resumed").strip().splitlines()[-1])
    base = int(Path(summary["resumed_from"]).name.split("-")[1])
    resumed_steps = study.steps("resumed")
    assert resumed_steps and resumed_steps[0][0] == base + 1
    trained = [k for step, keys in study.steps("first") if step <= base for k in keys]
    trained += [k for _, keys in resumed_steps for k in keys]
    counts = collections.Counter(trained)
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    assert {k for k, n in counts.items() if n > 1} == set(), "trained on twice"
    assert expected - set(counts) == set(), "never trained on"
    assert set(counts) == expected


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
@pytest.mark.timeout(600)
def test_running_solvers_follow_a_resumed_trainer(study: Study, stop: signal.Signals) -> None:
    solvers, new_run = preempt_while_solvers_stream(study, stop)
    codes = [s.wait(120) for s in solvers]
    resumed = study.procs[SIMULATIONS + 1]
    assert codes == [0] * SIMULATIONS, [study.output(f"solver-{i}")[-500:] for i in range(3)]
    for i in range(SIMULATIONS):
        assert f"followed the restarted trainer (run {new_run}" in study.output(f"solver-{i}")
    assert resumed.wait(300) == 0, study.output("resumed")[-3000:]
    assert_each_step_trained_on_once(study)
