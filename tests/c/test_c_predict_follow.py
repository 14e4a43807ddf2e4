"""A C solver of your own (external mode) asking for predictions (`mt_predict`) across a
trainer restart: the trainer is preempted (SIGTERM: a checkpoint, exit 143) and resumed
from its checkpoint. The C client follows the restarted trainer at its next `mt_send` (or
its close), not from `mt_predict` (docs/serve.md; the Python client follows from a
prediction too, tests/trainer/test_serving_follow.py, whose trainer script and `Run` this
test shares): after the resumed trainer serves and the solver's next send, a prediction
is answered, by the resumed trainer (the first one has exited), with a model version at
least the checkpoint's step, and asked as the run the solver follows.

Real processes (two trainers under `python` with a `ServingHook`, the C solver driven line
by line through mt_script), real sockets; the test waits on events (files, exits, a
prediction answered by the test's own `Predictor`), never on sleeps."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from predict_script import MT_ETIMEDOUT, Script

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGTERM"),
]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))
from test_serving_follow import Run, serves  # noqa: E402
from waiting import wait_until  # noqa: E402

FIRST, STEPS = 5, 10  # steps sent to the first trainer; in all
LONG = 600.0  # (a request's timeout, longer than the test's: one that waits it out fails)


def tame_seeds(count: int) -> list[int]:
    """The first `count` payload seeds whose 3 float32 (mt_script: byte j of seed s is
    (s * 31 + j * 7) & 255) are finite and below 10 in magnitude: most seeds give values
    that make the trainer's loss NaN (it then stops, NonFiniteLossError)."""
    seeds: list[int] = []
    s = 0
    while len(seeds) < count:
        values = np.frombuffer(bytes((s * 31 + j * 7) & 255 for j in range(12)), np.float32)
        if np.all(np.isfinite(values)) and np.all(np.abs(values) < 10):
            seeds.append(s)
        s += 1
    return seeds


SEEDS = tame_seeds(STEPS)


def sends(start: int, stop: int) -> list[str]:
    """mt_script lines sending steps start..stop-1 (x: 3 float32, y: 1, tame values),
    then a flush."""
    lines = []
    for t in range(start, stop):
        lines += [f"send {t} x 1 3 {SEEDS[t]}", f"send {t} y 1 1 {SEEDS[t]}"]
    return [*lines, "flush"]


def status(script: Script, line: int) -> list[str]:
    """Line `line`'s outputs, its status asserted MT_OK."""
    said = script.wait(line)
    assert said[-1].split(" ", 1)[0] == "0", said
    return said


def version(said: list[str]) -> int:
    """The model version a predict line's outputs name."""
    (line,) = [s for s in said if s.startswith("version ")]
    return int(line.split()[1])


@pytest.mark.timeout(400)
def test_a_c_solver_is_answered_by_the_resumed_trainer_after_its_next_send(
    script_exe: Path,
    tmp_path: Path,
) -> None:
    run = Run(tmp_path)
    exe = script_exe
    script = None
    try:
        first = run.trainer("first")
        wait_until(
            lambda: run.run_id() is not None, "the first trainer's rendezvous", 180, procs=[first]
        )
        old_run = run.run_id()
        script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(run.rendezvous)})
        ask = ["input x 1 1 3 : 0.5 -0.25 0", "output y 1 1"]
        status(script, script.send("id 0", "field x 1 1 3", "field y 1 1 1", "start", *ask))
        status(script, script.send(*sends(0, FIRST)))
        # trained before the preemption (as test_serving_follow waits): a trainer stopped
        # before its first step saves none, and the resumed model's version has no floor
        wait_until(
            lambda: len(run.steps("first")) >= FIRST, "the first steps trained", 180, procs=[first]
        )
        wait_until(
            lambda: serves(run.rendezvous, old_run), "the first trainer serving", 180, procs=[first]
        )
        status(script, script.send(f"predict {LONG}"))  # (the first trainer answers)

        first.send_signal(signal.SIGTERM)  # preempted: a checkpoint, exit 143
        assert first.wait(120) == 143, run.output("first")[-3000:]
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
            lambda: serves(run.rendezvous, new_run),
            "the resumed trainer serving",
            180,
            procs=[resumed],
        )

        # before that send: the request fails at once, saying that a trainer restarted
        # there and that the client follows it at its next send (a user's trial, 2026-12-
        # 04: it said to give or unset MELISSA_TRAINER_RUN_ID, which the solver never set)
        # (the first request may dial the endpoint it last used, refused; the next looks
        # the endpoint up again, at once: the rendezvous changed)
        for _ in range(3):
            said = script.wait(script.send(f"predict {LONG}"))
            code, _, words = said[-1].partition(" ")
            assert int(code) == MT_ETIMEDOUT, said
            if "refused the connection" not in words:
                break
        assert f"not run '{old_run}' that this client streams to: a trainer restarted" in words
        assert "follows it at its next mt_send" in words, words
        assert "MELISSA_TRAINER_RUN_ID" not in words, words

        # the next send follows the resumed trainer (at once after that request: it made
        # the send look at the rendezvous, not a second after its last look)
        status(script, script.send(*sends(FIRST, FIRST + 1)))
        answered = status(script, script.send(f"predict {LONG}"))
        saved = max(step for step, _ in run.steps("first"))
        assert version(answered) >= saved, answered  # (the resumed model: its checkpoint's)

        status(script, script.send(*sends(FIRST + 1, STEPS)))
        closed = script.send("close")
        lines, err = script.finish(180)
        assert lines[closed][-1].split(" ", 1)[0] == "0", (lines[closed], err)
        assert f"followed the restarted trainer (run {new_run} at " in err, err
        assert resumed.wait(180) == 0, run.output("resumed")[-3000:]
    finally:
        if script is not None:
            script.kill()
        run.cleanup()
