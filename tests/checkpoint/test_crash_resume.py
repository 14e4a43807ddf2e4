"""The heat example killed with SIGKILL at awkward points, then resumed from `latest`:
it completes, and every (simulation, step) is trained on exactly once in the lineage of
the final state (the steps up to the checkpoint resumed from, then the resumed run's).

Before the study's record said "finished" only once a simulation's data was complete,
a kill while data was still queued left the resumed run waiting forever for
simulations the launcher would not run again.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from held_ports import held_port
from process_tree import processes_with, sigkill_between_launches, simulation_of
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.launcher import LauncherTuning

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
    pytest.mark.e2e,
]

DRIVER = Path(__file__).parents[1] / "scripts" / "heat_lineage.py"
TAMPERED_SOLVERS = Path(__file__).parents[1] / "scripts" / "tampered_solvers"  # a sitecustomize.py
SIMULATIONS, STEPS, BATCH, SAVE_STEPS = 6, 20, 4, 6
TOTAL_STEPS = SIMULATIONS * STEPS // BATCH
#: The chaos test's kills of one simulation, all runs together: the launcher restarts a
#: killed simulation (same id) `max_restarts` times (the heat example keeps the default);
#: one more failure and it gives the id up and draws a replacement (id 6), outside the
#: oracle's ids 0-5 (seed 1's run had one simulation killed three times).
KILLS_PER_SIMULATION = LauncherTuning().max_restarts
#: what a killed or preempted trainer's test waits for (local solvers die with it)
SOLVERS_GONE = "every solver's end (one outlived its trainer)"
FLAGS = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "6",
    "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "16", "--watermark", "1",  # 16: the receiver archives
    "--sample_to_insert_ratio", "none", "--batch_size", str(BATCH),
    "--save_steps", str(SAVE_STEPS), "--logging_steps", "5", "--eval_steps", "none",
    "--disable_progress_bar", "--stop_sync_steps", "2", "--json",
]  # fmt: skip


class Run:
    """One trainer process of the test, with its lineage log.

    `paced`: slow training (and slower solvers), so that a test can kill the run at a
    chosen point. A run that no test kills (a resume that must only complete) needs no
    pace: its lineage is checked the same, whatever its speed."""

    def __init__(
        self, tmp: Path, name: str, *extra: str, ranks: int = 1, paced: bool = True
    ) -> None:
        self.log = tmp / f"{name}.lineage"
        self.out = tmp / "out"
        path = os.pathsep.join(filter(None, [str(TAMPERED_SOLVERS), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "LINEAGE_LOG": str(self.log),
               "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
        if paced:
            env.update(STEP_SLEEP="0.12", SOLVER_STEP_SLEEP="0.04")
        #: training holds while this file exists (`heat_lineage.py`), up to 10 minutes
        self.hold = tmp / f"{name}.hold"
        env.update(LINEAGE_HOLD=str(self.hold), LINEAGE_HOLD_SECONDS="600")
        self.stderr = open(tmp / f"{name}.stderr", "w")  # noqa: SIM115 - closed in wait
        launch = [sys.executable]
        if ranks > 1:  # both ranks append their steps to the one log (O_APPEND)
            accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
            launch = [accelerate or "accelerate", "launch", "--multi_gpu",
                      "--num_processes", str(ranks), "--num_machines", "1",
                      "--mixed_precision", "no", "--dynamo_backend", "no",
                      "--main_process_port", str(held_port())]  # fmt: skip
        self.proc = subprocess.Popen(
            [*launch, str(DRIVER), *FLAGS, "--output_dir", str(self.out), *extra],
            cwd=tmp,
            env=env,
            stdout=self.stderr,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # SIGKILL of the group: the launcher and every rank
        )

    def kill(self) -> None:
        """SIGKILL the trainer: its process group and every process of this run (the
        ranks of `accelerate launch` are not in the launcher's group and would outlive
        it); its solvers are left alone: they must die with their rank by themselves.
        Never while a solver is being launched (`sigkill_between_launches`): the local
        backend leaves that window open with setpriv, documented."""
        solvers = set(solvers_alive(self.out))  # left to die with their trainer
        trainers = set(processes_with(str(self.log))) - solvers
        sigkill_between_launches(self.proc.pid, sorted(trainers))

    def steps(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """(step, [(simulation, time step), ...]) of each step trained; also collects
        the parameter vectors each simulation's samples had (`parameters`)."""
        self.parameters: dict[int, set[str]] = {}
        if not self.log.exists():
            return []
        lines = []
        # complete lines only: a read while a rank appends can end in the middle of a line
        # (one write(), but copied page by page), whose last key would not parse
        for line in self.log.read_text().split("\n")[:-1]:
            step, *keys = line.split()
            if len(keys) == BATCH:  # (a line cut by the kill is not a step trained)
                pairs = []
                for key in keys:
                    sid, t, parameters = key.split(":")
                    pairs.append((int(sid), int(t)))
                    self.parameters.setdefault(int(sid), set()).add(parameters)
                lines.append((int(step), pairs))
        return lines

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                # every process of the run, not the launcher alone: the ranks of a
                # timed-out `accelerate launch` would outlive it into the next tests
                self.kill()
                self.proc.wait()
            self.stderr.close()

    def output(self) -> str:
        return Path(self.stderr.name).read_text()[-4000:]


def solvers_alive(out: Path) -> list[int]:
    return processes_with(str(out / "rendezvous"))


def checkpoints(out: Path) -> list[int]:
    root = out / "checkpoints"
    if not root.exists():
        return []
    return sorted(
        int(m.group(1)) for p in root.iterdir() if (m := re.fullmatch(r"checkpoint-(\d+)", p.name))
    )


def victims(alive: list[int], killed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(pid, simulation id) of the solvers among `alive` whose simulation may be killed
    once more: fewer than `KILLS_PER_SIMULATION` of the `killed` (pid, simulation id) so
    far, so that the launcher answers the kill with a restart, never a replacement. A
    pid whose simulation is unknown (it just exited) is no victim."""
    kills = collections.Counter(sid for _, sid in killed)
    found = ((pid, simulation_of(pid)) for pid in alive)
    return [
        (pid, sid) for pid, sid in found if sid is not None and kills[sid] < KILLS_PER_SIMULATION
    ]


def kill_solver(pid: int) -> None:
    """SIGKILL a solver that `victims` found alive: one that exited since (reaped by its
    launcher) is a kill the launcher will not see, which the oracle does not mind."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def all_solvers_exited(run: Run) -> bool:
    logs = run.out / "study" / "logs"
    launched = len(list(logs.glob("sim-*.log"))) if logs.exists() else 0
    return launched >= SIMULATIONS and not solvers_alive(run.out)


def after_the_last_simulation_exited(run: Run) -> bool:
    """Every solver exited, its data still queued (the buffer, the receiver's socket)
    and training far from its end. Training is held from the first checkpoint on (its
    hold file made here) while the solvers run to their end: the point is then reached
    whatever the machine's load (paced alone, a loaded machine's slow solvers let the
    trainer reach the end first)."""
    if checkpoints(run.out) and not run.hold.exists():
        run.hold.touch()
    return all_solvers_exited(run) and len(run.steps()) < TOTAL_STEPS - 2


POINTS: dict[str, Callable[[Run], bool]] = {
    # inside the first checkpoint interval: nothing saved yet, the resume starts afresh
    "first-interval": lambda r: len(r.steps()) >= 2 and not checkpoints(r.out),
    "just-after-a-checkpoint": lambda r: bool(checkpoints(r.out)),
    "while-simulations-run": lambda r: len(r.steps()) >= 9 and bool(solvers_alive(r.out)),
    "after-the-last-simulation-exited": after_the_last_simulation_exited,
    "near-the-end": lambda r: len(r.steps()) >= TOTAL_STEPS - 2,
}


@pytest.mark.timeout(600)  # (bounds for a loaded machine: about 30 s each, idle)
@pytest.mark.parametrize("point", list(POINTS))
def test_sigkill_then_resume_trains_on_every_step_exactly_once(tmp_path: Path, point: str) -> None:
    first = Run(tmp_path, "first")
    try:
        wait_until(
            lambda: POINTS[point](first),
            lambda: f"{point}: {first.output()}",
            240,
            procs=[first.proc],
            interval=0.05,
        )
        first.kill()
    finally:
        first.wait(30)
    # local solvers die with the trainer (PDEATHSIG)
    wait_until(lambda: not solvers_alive(first.out), SOLVERS_GONE, 60, interval=0.1)

    resumed_from = latest_checkpoint(first.out / "checkpoints")
    saved = 0 if resumed_from is None else int(resumed_from.name.split("-")[1])
    second = Run(tmp_path, "second", "--resume_from_checkpoint", "latest", paced=False)
    code = second.wait(300)
    assert code == 0, second.output()

    before = [keys for step, keys in first.steps() if step <= saved]
    after = [keys for _, keys in second.steps()]
    assert len(before) == saved and all(s > saved for s, _ in second.steps())
    lineage = collections.Counter(k for keys in before + after for k in keys)
    twice = {k: n for k, n in lineage.items() if n > 1}
    missing = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)} - set(lineage)
    assert not twice and not missing, (point, saved, sorted(twice)[:10], sorted(missing)[:10])
    assert sum(lineage.values()) == SIMULATIONS * STEPS
    assert not solvers_alive(first.out)
    summary = json.loads([line for line in second.output().splitlines() if line[:1] == "{"][-1])
    assert summary["samples_received"] == SIMULATIONS * STEPS  # the counters, exact
    one_parameter_vector_per_simulation(first, second)


def one_parameter_vector_per_simulation(*runs: Run) -> None:
    """Every sample of a simulation carries its parameters in one order, before and
    after the resume (a checkpoint's JSON sorted them once: the resumed samples of a
    known simulation had them permuted)."""
    seen: dict[int, set[str]] = {}
    for run in runs:
        run.steps()
        for sid, vectors in run.parameters.items():
            seen.setdefault(sid, set()).update(vectors)
    assert {s: v for s, v in seen.items() if len(v) != 1} == {}


def lineage_of(first: Run, second: Run, saved: int) -> collections.Counter[tuple[int, int]]:
    before = [keys for step, keys in first.steps() if step <= saved]
    after = [keys for _, keys in second.steps()]
    return collections.Counter(k for keys in before + after for k in keys)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", [0, 1])
def test_chaos_solvers_and_the_trainer_killed_at_random_times(tmp_path: Path, seed: int) -> None:
    """Three solvers SIGKILLed at random times (the launcher restarts them: at most
    `KILLS_PER_SIMULATION` kills of one simulation, all runs together), the trainer
    SIGKILLed once at a random time and resumed; one more solver killed in the resumed
    run if one still runs: every (simulation, step) is trained on exactly once in the
    final lineage. Seed 1's study is adaptive (Breed, fed every 4 steps: the checkpoints
    hold per-simulation losses not yet reduced)."""
    rng = random.Random(seed)
    adaptive = ("--sampler", "breed", "--simulation_loss_steps", "4") if seed else ()
    first = Run(tmp_path, "first", *adaptive)
    killed: list[tuple[int, int]] = []  # (pid, simulation id), both runs
    trainer_kill = rng.uniform(0.35, 0.8) * TOTAL_STEPS
    try:
        deadline = time.monotonic() + 90
        while len(first.steps()) < trainer_kill or len(killed) < 3:
            assert first.proc.poll() is None, first.output()
            assert time.monotonic() < deadline, first.output()
            alive = victims(solvers_alive(first.out), killed)
            if alive and len(killed) < 3 and rng.random() < 0.3:
                killed.append(victim := rng.choice(alive))
                kill_solver(victim[0])
            time.sleep(0.05)
        first.kill()
    finally:
        first.wait(30)
    resumed_from = latest_checkpoint(first.out / "checkpoints")
    saved = 0 if resumed_from is None else int(resumed_from.name.split("-")[1])
    second = Run(tmp_path, "second", "--resume_from_checkpoint", "latest", *adaptive)
    try:
        deadline = time.monotonic() + 60
        while second.proc.poll() is None and time.monotonic() < deadline:
            alive = victims(solvers_alive(second.out), killed)
            if alive:
                killed.append(victim := rng.choice(alive))
                kill_solver(victim[0])
                break
            time.sleep(0.05)
        code = second.proc.wait(150)
    finally:
        second.wait(10)
    assert code == 0, second.output()
    lineage = lineage_of(first, second, saved)
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    assert set(lineage) == expected and set(lineage.values()) == {1}, (killed, saved)
    assert len(killed) >= 3  # three before the trainer's kill
    one_parameter_vector_per_simulation(first, second)
    assert not solvers_alive(first.out)


@pytest.mark.timeout(240)
def test_two_ranks_sigkilled_after_a_checkpoint_resume_exactly_once(tmp_path: Path) -> None:
    """Both ranks of `accelerate launch` killed at once (a node lost), resumed: the ranks
    agree on which simulations the checkpoint holds complete (each has half of every
    simulation's steps) and everything else runs again. The study is adaptive (Breed,
    fed both ranks' losses every 4 steps)."""
    adaptive = ("--sampler", "breed", "--simulation_loss_steps", "4")
    first = Run(tmp_path, "first", *adaptive, ranks=2)
    try:
        wait_until(
            lambda: checkpoints(first.out) and len(first.steps()) >= 2 * (SAVE_STEPS + 2),
            lambda: f"a checkpoint and {2 * (SAVE_STEPS + 2)} steps: {first.output()}",
            120,
            procs=[first.proc],
            interval=0.05,
        )
        first.kill()
    finally:
        first.wait(30)
    wait_until(lambda: not solvers_alive(first.out), SOLVERS_GONE, 60, interval=0.1)
    resumed_from = latest_checkpoint(first.out / "checkpoints")
    assert resumed_from is not None
    saved = int(resumed_from.name.split("-")[1])
    second = Run(
        tmp_path, "second", "--resume_from_checkpoint", "latest", *adaptive, ranks=2, paced=False
    )
    assert second.wait(180) == 0, second.output()
    lineage = lineage_of(first, second, saved)
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    assert set(lineage) == expected and set(lineage.values()) == {1}, saved
    one_parameter_vector_per_simulation(first, second)


@pytest.mark.timeout(300)
def test_sigterm_to_accelerate_launch_while_a_checkpoint_is_written_resumes_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a user's Ctrl-C or a scheduler's SIGTERM does to `accelerate launch` (two
    ranks) while a checkpoint is being written (its staging directory there, held open
    by `heat_lineage.py`'s $LINEAGE_SLOW_SAVE): the save completes, every rank stops at
    one step with a checkpoint of it, no solver is left, and the resume from `latest`
    trains on every (simulation, step) exactly once."""
    monkeypatch.setenv("LINEAGE_SLOW_SAVE", "3")  # (Run passes the environment on)
    first = Run(tmp_path, "first", ranks=2)
    monkeypatch.delenv("LINEAGE_SLOW_SAVE")  # the resume saves at full speed
    root = first.out / "checkpoints"
    try:
        wait_until(
            lambda: checkpoints(first.out) and list(root.glob(".tmp-*")),
            lambda: f"a checkpoint, and the next one being written: {first.output()}",
            180,
            procs=[first.proc],
            interval=0.02,
        )
        writing = sorted(p.name for p in root.glob(".tmp-*"))
        first.proc.send_signal(signal.SIGTERM)  # the launcher: it signals both ranks
        code = first.proc.wait(120)
    finally:
        first.wait(30)
    assert code != 0, first.output()  # accelerate reports its ranks' preemption as a failure
    written = checkpoints(first.out)
    being_written = int(writing[0].split("-")[-1])
    assert being_written in written, (writing, written)  # the save completed
    saved = written[-1]
    assert saved >= being_written and not list(root.glob(".tmp-*")), written
    assert f"preempted by SIGTERM at step {saved}" in first.output()
    wait_until(lambda: not solvers_alive(first.out), SOLVERS_GONE, 60, interval=0.1)
    second = Run(tmp_path, "second", "--resume_from_checkpoint", "latest", ranks=2, paced=False)
    assert second.wait(180) == 0, second.output()
    lineage = lineage_of(first, second, saved)
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    assert set(lineage) == expected and set(lineage.values()) == {1}, saved
    one_parameter_vector_per_simulation(first, second)
