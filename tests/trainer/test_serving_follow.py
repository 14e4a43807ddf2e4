"""A solver of your own (external mode) asking for a prediction at every step while its
trainer is preempted (SIGTERM: a checkpoint, exit 143) and resumed: real processes (a
trainer under `python`, tests/scripts/serving_follow.py, with a `ServingHook`; a solver
with a `Client`), real sockets.

Found by a user: such a solver got `PredictTimeout` for every request from the restart
until its next `send` noticed the rewritten rendezvous (at most once a second) and
followed the resumed trainer: its predictor asked as the old run, which the resumed
trainer refuses (another run). Now a request made while the requests before it failed
looks at the rendezvous and follows the restarted trainer itself
(`melissa_trainer.client.asking`): the first request after the resumed trainer serves
is answered. And a send that followed the restarted trainer after an answered request
hung: the predictor's socket kept the old transport's context from ending.

The solver does what the test tells it (a line on its stdin) and reports on its stdout,
so that what it meets does not depend on how long the trainers take to start: the test
waits on events (the processes' files, exits, a prediction answered), never on sleeps.
The requests' timeout (600 s) is longer than the test's own: a request that waited for
it fails the test.
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
from typing import Any

import numpy as np
import pytest
from waiting import wait_until

from melissa_trainer.client import PredictionUnavailable, Predictor

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGTERM"),
]

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "serving_follow.py"
#: longer than the test's own timeout: a request that waits for it fails the test
LONG = 600.0
FIRST, STEPS = 5, 10  # steps sent to the first trainer; in all

SOLVER = r"""
import json, sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning, PredictionUnavailable

def x_of(t):
    return np.array([0.5, -0.25, t / 100], np.float32)

def say(**what):
    print(json.dumps(what), flush=True)

fields = {"x": ((3,), "float32"), "y": ((1,), "float32")}
tuning = ClientTuning(replay_bytes=1 << 20)  # (a window: it follows)
with Client(fields, simulation_id=0, tuning=tuning) as client:
    say(ready=client.run_id)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "send":  # send a..b-1
            for t in range(int(args[0]), int(args[1])):
                x = x_of(t)
                client.send(t, x=x, y=np.array([x.sum()], np.float32))
            client.flush()
            say(sent=int(args[1]), run=client.run_id)
        elif command == "ask":  # up to n requests, until the first answer
            outcomes = []
            for _ in range(int(args[0])):
                try:
                    _, version = client.predict({"x": x_of(0)}, timeout=float(args[1]))
                except PredictionUnavailable as exc:
                    outcomes.append({"error": type(exc).__name__ + ": " + str(exc)})
                    continue
                outcomes.append({"version": version})
                break
            say(outcomes=outcomes, run=client.run_id)
        elif command == "close":
            break
say(closed=True)
"""


class Run:
    """The trainers and the solver of one test in `tmp`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.out, self.rendezvous = tmp, tmp / "out", tmp / "rendezvous"
        self.procs: list[subprocess.Popen[str]] = []
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                  os.environ.get("PYTHONPATH")]))}  # fmt: skip
        for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID",
                     "MELISSA_TRAINER_ATTEMPT", "MELISSA_TRAINER_SERVE_ENDPOINTS"):  # fmt: skip
            self.env.pop(name, None)
        self.solver: subprocess.Popen[str] | None = None

    def trainer(self, name: str, *extra: str) -> subprocess.Popen[str]:
        env = {**self.env, "LINEAGE_LOG": str(self.tmp / f"{name}.lineage")}
        cmd = [sys.executable, str(SCRIPT), "--output_dir", str(self.out), "--rendezvous",
               str(self.rendezvous), "--batch_size", "1", "--buffer", "fifo", "--buffer_size",
               "64", "--watermark", "1", "--logging_steps", "1000", "--report_to", "none",
               "--disable_progress_bar", "--stop_sync_steps", "1", *extra]  # fmt: skip
        with open(self.tmp / f"{name}.out", "w") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        return proc

    def start_solver(self) -> dict[str, Any]:
        script = self.tmp / "solver.py"
        script.write_text(SOLVER)
        # (external mode: its close waits for the trainer's confirmation of its BYE,
        # given by the stop record when the trainer ends with the stream before asked)
        env = {**self.env, "MELISSA_TRAINER_RENDEZVOUS": str(self.rendezvous)}
        with open(self.tmp / "solver.err", "w") as err:
            self.solver = subprocess.Popen(
                [sys.executable, str(script)], env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
            )  # fmt: skip
        self.procs.append(self.solver)
        return self.read()

    def tell(self, line: str) -> dict[str, Any]:
        """Tell the solver `line`; its report (blocks until it reports)."""
        assert self.solver is not None and self.solver.stdin is not None
        self.solver.stdin.write(line + "\n")
        self.solver.stdin.flush()
        return self.read()

    def read(self) -> dict[str, Any]:
        assert self.solver is not None and self.solver.stdout is not None
        line = self.solver.stdout.readline()
        assert line, f"the solver ended: {(self.tmp / 'solver.err').read_text()[-3000:]}"
        return dict(json.loads(line))

    def output(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text()

    def run_id(self) -> str | None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            rank0 = json.loads((self.rendezvous / "rank_0.json").read_text())
            return None if rank0.get("stopped") else str(rank0["run_id"])
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

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def serves(rendezvous: Path, run_id: str) -> bool:
    """Whether the trainer of run `run_id` answers a prediction (the test's own request)."""
    with Predictor(0, rendezvous_dir=rendezvous, run_id=run_id) as predictor:
        try:
            predictor.predict({"x": np.zeros(3, np.float32)}, timeout=1.0)
        except PredictionUnavailable:
            return False
    return True


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    made = Run(tmp_path)
    try:
        yield made
    finally:
        made.cleanup()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("asks_while_down", [True, False], ids=["asks-throughout", "sends-first"])
def test_a_solver_is_answered_by_the_resumed_trainer_without_sending_first(
    run: Run, asks_while_down: bool
) -> None:
    first = run.trainer("first")
    wait_until(
        lambda: run.run_id() is not None, "the first trainer's rendezvous", 180, procs=[first]
    )
    old_run = run.run_id()
    assert run.start_solver() == {"ready": old_run}
    assert run.tell(f"send 0 {FIRST}")["sent"] == FIRST
    wait_until(
        lambda: len(run.steps("first")) >= FIRST, "the first steps trained", 180, procs=[first]
    )
    answered = run.tell(f"ask 1 {LONG}")
    assert "version" in answered["outcomes"][-1], answered  # (the first trainer serves)

    first.send_signal(signal.SIGTERM)  # preempted: a checkpoint, exit 143
    assert first.wait(120) == 143, run.output("first")[-3000:]
    if asks_while_down:
        # no trainer serves: each request fails, at once (not at its 600 s timeout)
        down = run.tell(f"ask 3 {LONG}")
        assert len(down["outcomes"]) == 3 and all("error" in o for o in down["outcomes"])

    resumed = run.trainer("resumed", "--resume_from_checkpoint", "latest")
    wait_until(
        lambda: run.run_id() not in (None, old_run),
        "the resumed trainer's rendezvous",
        180,
        procs=[resumed],
    )
    new_run = run.run_id()
    assert new_run is not None
    wait_until(
        lambda: serves(run.rendezvous, new_run), "the resumed trainer serving", 180, procs=[resumed]
    )
    if not asks_while_down:
        # a send follows the resumed trainer while the predictor's socket is open (its
        # last request was answered): the follow ends the old transport's context
        assert run.tell(f"send {FIRST} {FIRST + 1}") == {"sent": FIRST + 1, "run": new_run}

    # the first request after the resumed trainer serves is answered, by the resumed
    # model (of the checkpoint's step or later), asked as the run the solver follows;
    # before, every request failed ("belongs to another run") until a send followed
    after = run.tell(f"ask 3 {LONG}")
    assert len(after["outcomes"]) == 1 and "version" in after["outcomes"][0], after
    assert after["run"] == new_run
    saved = max(step for step, _ in run.steps("first"))
    assert after["outcomes"][0]["version"] >= saved

    # the stream followed too: the rest of the steps, then the close (confirmed)
    sent = FIRST if asks_while_down else FIRST + 1
    assert run.tell(f"send {sent} {STEPS}") == {"sent": STEPS, "run": new_run}
    assert run.tell("close") == {"closed": True}
    assert run.solver is not None and run.solver.wait(120) == 0
    assert resumed.wait(180) == 0, run.output("resumed")[-3000:]
    assert_each_step_trained_on_once(run, saved)


def assert_each_step_trained_on_once(run: Run, base: int) -> None:
    """Every (simulation, time step) trained on exactly once: the first run's steps (up
    to its preemption checkpoint, `base`), then the resumed run's (from base + 1)."""
    resumed_steps = run.steps("resumed")
    assert resumed_steps and resumed_steps[0][0] == base + 1
    trained = [k for _, keys in run.steps("first") for k in keys]
    trained += [k for _, keys in resumed_steps for k in keys]
    counts = collections.Counter(trained)
    assert {k for k, n in counts.items() if n > 1} == set(), "trained on twice"
    assert set(counts) == {(0, t) for t in range(STEPS)}
