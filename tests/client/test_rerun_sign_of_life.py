"""A rerun that skips the steps its receivers hold sends a sign of life: the held step at
hand, once `rerun.sign_interval` seconds have passed without a send
(`melissa_trainer.client.rerun`), to whichever receiver it is routed (the launcher hears
every rank's receiver: `stream.rank_activity`). Real sockets, in-process receivers (two training
ranks, `resumed_runs.Run`): run A's take a first attempt's steps, which is killed before
its BYE; run B's resume from their checkpoint; the second attempt
(``MELISSA_TRAINER_ATTEMPT=1``) computes every step again.

The oracle: run B's receivers, their duplicates counter (each held step that came
again), their buffers (every step once) and the BYE counts. Before, a rerun whose held
part took longer than the launcher's silence bound sent nothing while it recomputed it,
and was killed as hung on every attempt (the hsolver user trial: the resumed study
failed): the slow case below counted no duplicate. A rerun's first send goes out at once,
held or not (its first message comes when the first attempt's did)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

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


def attempt(monkeypatch: pytest.MonkeyPatch, number: int, run_id: str, sid: int = SID) -> Client:
    monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", str(number))
    monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", run_id)
    return Client(FIELDS, {}, simulation_id=sid)


def field(t: int) -> np.ndarray:
    return np.full(3, t, dtype="<f4")


def resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: list[Run], before: list[int],
    puts: list[int], sid: int = SID,
) -> Run:  # fmt: skip
    """Run A takes the first attempt's `before` of simulation `sid`; run B resumes from
    its checkpoint once rank r put `puts[r]`; the first attempt is then killed (no BYE)."""
    rendezvous = tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(monkeypatch, 0, "run-a", sid)
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


def check_every_step_once(run: Run, again: Client, sid: int = SID) -> None:
    assert again.bye_counts == [STEPS // 2, STEPS // 2]  # (each step counted once)
    run.complete(sid)
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
    # each came again, a duplicate its receiver dropped (and the launcher, which hears
    # every rank's receiver, heard). Before, receiver 0's only ([held there, 0])
    duplicates = [r.telemetry()["duplicates"] for r in run.receivers]
    assert duplicates == list(held_by_rank(before, puts)), duplicates
    assert [r.telemetry()["samples_put"] for r in run.receivers] == [5, 5]


@CHECKPOINTS
def test_a_fast_rerun_sends_only_its_first_held_step(
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
    # the first send goes out at once, held or not (the rerun's first message comes when
    # the first attempt's did): step 0, held by rank 0, one duplicate; then none
    assert [r.telemetry()["duplicates"] for r in run.receivers] == [1, 0]


@pytest.mark.parametrize(
    ("silence", "signs"), [("1", [5, 5]), ("3600", [0, 1])], ids=["slow", "fast"]
)
def test_an_odd_simulations_signs_of_life_reach_both_receivers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    runs: list[Run],
    silence: str,
    signs: list[int],
) -> None:
    """Simulation 5 routed ``(s + t) % 2`` (the receivers advertise it): its even steps go
    to receiver 1, its odd ones to receiver 0; the launcher hears both
    (`stream.rank_activity`). Every step held. The first send (step 0, receiver 1's) goes
    at once, then, slow, every later one (a step's 0.3 s past the interval since the
    last send). Before, receiver 0's only (its first there, step 1: [1, 0] fast, [5, 0]
    slow), which a simulation whose held steps never route there never sent."""
    sid = 5
    run = resumed(tmp_path, monkeypatch, runs, list(range(STEPS)), [5, 5], sid)
    monkeypatch.setenv("MELISSA_TRAINER_SILENCE_S", silence)
    again = attempt(monkeypatch, 1, "run-b", sid)
    assert again.routing == "simulation_step"  # (else the parities are t % 2's)
    for t in range(STEPS):
        if silence == "1":
            time.sleep(STEP_TIME)  # (the solver computing step t: longer than the interval)
        again.send(t, u=field(t))
    again.close()
    check_every_step_once(run, again, sid)
    assert [r.telemetry()["duplicates"] for r in run.receivers] == signs


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


def test_with_a_communicator_the_first_send_is_sent_on_every_rank() -> None:
    """Before the parts are placed (the first send, with a communicator: collective),
    `Sending._gated` forbids a sign of life by the clock (``pace=False``: each rank's is
    its own). The first send is sent all the same, held or not: "the first" is the same
    on every rank, so every rank sends it, and the parts are placed; later held steps
    wait for the clock. An interval of 0 s: by the clock, every held step would be due.
    Before, the first held step was skipped on every rank: the rerun sent nothing until
    its first unheld step (the launcher heard nothing meanwhile)."""
    from melissa_trainer.client.fast_send import SendClock
    from melissa_trainer.client.rerun import RerunSkip
    from melissa_trainer.stream.step_set import StepSet
    from melissa_trainer.wire import HELD_FINISHED, HeldReply

    transport = SimpleNamespace(steps=[StepSet()], clock=SendClock(), opened=time.monotonic())
    held_all = HeldReply(SID, 0, 0, 1, HELD_FINISHED, 0, b"")
    skip = RerunSkip([held_all], SID, None, transport, 0.0)  # type: ignore[arg-type]
    assert [skip(t, pace=False) for t in range(3)] == [False, True, True]
    assert (skip.signs, skip.skipped, transport.steps[0].count) == (1, 2, 2)  # (0: the send's)
