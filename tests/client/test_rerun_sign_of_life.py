"""A rerun that skips the steps its receivers hold sends a sign of life: the held step at
hand, once `rerun.sign_interval` seconds have passed without a send
(`melissa_trainer.client.rerun`). Real sockets, in-process receivers (two training
ranks, `resumed_runs.Run`): run A's take a first attempt's steps, which is killed before
its BYE; run B's resume from their checkpoint; the second attempt
(``MELISSA_TRAINER_ATTEMPT=1``) computes every step again.

The oracle: run B's receivers, their duplicates counter (each held step that came
again), their buffers (every step once) and the BYE counts. Before, a rerun whose held
part took longer than the launcher's silence bound sent nothing while it recomputed it,
and was killed as hung on every attempt (the hsolver user trial: the resumed study
failed): the slow case below counted no duplicate."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import drain
from resumed_runs import CHECKPOINTS, Run

from melissa_trainer.client import Client

pytestmark = pytest.mark.timeout(120)

SID = 4  # (even: step t to rank t % 2 under either routing, `wire.routing`)
FIELDS = {"u": ((3,), "<f4")}
STEPS = 10
#: ``MELISSA_TRAINER_SILENCE_S`` of the slow case: a sign of life due after 0.25 s
SILENCE = "1"
#: the slow solver's step: longer than that interval, so each held step is due as one
STEP_TIME = 0.3


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Run]]:
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "rendezvous"))
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    made: list[Run] = []
    try:
        yield made
    finally:
        for run in made:
            run.stop()


def attempt(monkeypatch: pytest.MonkeyPatch, number: int, run_id: str) -> Client:
    monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", str(number))
    monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", run_id)
    return Client(FIELDS, {}, simulation_id=SID)


def field(t: int) -> np.ndarray:
    return np.full(3, t, dtype="<f4")


def resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: list[Run], before: list[int],
    puts: list[int],
) -> Run:  # fmt: skip
    """Run A takes the first attempt's `before`; run B resumes from its checkpoint once
    rank r put `puts[r]`; the first attempt is then killed (no BYE)."""
    rendezvous = tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(monkeypatch, 0, "run-a")
    for t in before:
        first.send(t, u=field(t))
    first.flush()
    checkpoint = runs[0].checkpoint(puts)
    runs[0].stop()
    runs.append(Run(rendezvous, "run-b", checkpoint))
    first.close(bye=False)
    return runs[1]


def held_by_rank(before: list[int], puts: list[int]) -> list[int]:
    """How many steps each rank's checkpoint holds (`CHECKPOINTS`: rank t % 2)."""
    return [min(puts[r], sum(1 for t in before if t % 2 == r)) for r in range(2)]


def check_every_step_once(run: Run, again: Client) -> None:
    assert again.bye_counts == [STEPS // 2, STEPS // 2]  # (each step counted once)
    run.complete(SID)
    steps = sorted(int(s["time_step"]) for b in run.buffers for s in drain(b))
    assert steps == list(range(STEPS))  # each once


@CHECKPOINTS
def test_a_slow_rerun_sends_a_held_step_each_interval(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    runs: list[Run],
    before: list[int],
    puts: list[int],
) -> None:
    run = resumed(tmp_path, monkeypatch, runs, before, puts)
    monkeypatch.setenv("MELISSA_TRAINER_SILENCE_S", SILENCE)
    again = attempt(monkeypatch, 1, "run-b")
    for t in range(STEPS):
        time.sleep(STEP_TIME)  # (the solver computing step t: longer than the interval)
        again.send(t, u=field(t))
    again.close()
    check_every_step_once(run, again)
    # the oracle: each held step came after more than an interval without a send, so
    # each came again, a duplicate the receiver dropped (and the launcher heard)
    duplicates = [r.telemetry()["duplicates"] for r in run.receivers]
    assert duplicates == held_by_rank(before, puts), duplicates
    assert [r.telemetry()["samples_put"] for r in run.receivers] == [5, 5]


@CHECKPOINTS
def test_a_fast_rerun_sends_no_held_step(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    runs: list[Run],
    before: list[int],
    puts: list[int],
) -> None:
    run = resumed(tmp_path, monkeypatch, runs, before, puts)
    monkeypatch.setenv("MELISSA_TRAINER_SILENCE_S", "3600")  # (an interval of 900 s)
    again = attempt(monkeypatch, 1, "run-b")
    for t in range(STEPS):
        again.send(t, u=field(t))
    again.close()
    check_every_step_once(run, again)
    assert [r.telemetry()["duplicates"] for r in run.receivers] == [0, 0]


@pytest.mark.parametrize("value", ["x", "-1", "0", "0.0", "1e3", "1.", ".5", "1,5", "٣"])
def test_a_mistyped_silence_is_refused_at_the_start(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from melissa_trainer.client.launched_env import check_silence

    monkeypatch.setenv("MELISSA_TRAINER_SILENCE_S", value)
    with pytest.raises(ValueError, match="MELISSA_TRAINER_SILENCE_S=.* is not a number of sec"):
        check_silence()


@pytest.mark.parametrize(
    ("value", "interval"),
    [(None, 10.0), (" ", 10.0), ("120", 30.0), (" 0.4 ", 0.2), ("2.5", 0.625)],
)
def test_the_interval_is_a_quarter_of_the_launchers_bound(
    monkeypatch: pytest.MonkeyPatch, value: str | None, interval: float
) -> None:
    from melissa_trainer.client.rerun import sign_interval

    if value is None:
        monkeypatch.delenv("MELISSA_TRAINER_SILENCE_S", raising=False)
    else:
        monkeypatch.setenv("MELISSA_TRAINER_SILENCE_S", value)
    assert sign_interval() == interval
