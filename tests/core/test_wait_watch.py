"""A rank waiting long in a collective warns instead of hanging silent (htrial28
finding 4: a SIGSTOPped rank of two held the other in the stop agreement for torch's
30-minute collective timeout, without a word). The collective here is a fake whose
wait blocks on an event: the tests synchronise on events (the warning logged, the
release), never on sleeps; the watch's first bound is made tiny instead of 60 s.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: wait_said
from wait_said import WAIT, Said  # noqa: E402

from melissa_trainer.core import stop_sync as stop_sync_module  # noqa: E402
from melissa_trainer.core.stop_sync import StopSync
from melissa_trainer.core.wait_watch import WaitWatch
from melissa_trainer.core.wait_words import AGREEMENT_USUAL, CHECKPOINT_USUAL


@pytest.mark.timeout(60)
def test_a_long_wait_is_warned_about_naming_what_it_waits_for(said: Said) -> None:
    watch = WaitWatch(rank=1, first=0.001)
    release = threading.Event()

    def wait() -> None:
        with watch.waiting("the other ranks at the test's collective"):
            assert release.wait(WAIT)

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        assert said.warned.wait(WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    first = said.messages[0]
    assert first.startswith("rank 1 has waited"), first
    assert "the other ranks at the test's collective" in first
    assert "stopped (SIGSTOP" in first and "long save" in first and "timeout" in first
    assert said.messages[-1].startswith("rank 1: the other ranks at the test's collective arrived")


@pytest.mark.timeout(60)
def test_a_short_wait_says_nothing(said: Said) -> None:
    watch = WaitWatch(rank=0, first=3600.0)
    for _ in range(3):
        with watch.waiting("nothing long"):
            pass
    assert said.messages == []


class SlowWork:
    """A gloo all-reduce's work whose wait lasts until `release` is set."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def wait(self) -> bool:
        assert self.release.wait(WAIT)
        return True


@pytest.mark.timeout(60)
def test_the_stop_agreement_warns_while_a_rank_is_missing_and_agrees_alike(
    said: Said, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    monkeypatch.setattr(stop_sync_module.dist, "all_reduce", lambda *a, **k: SlowWork(release))
    sync = StopSync(torch.device("cpu"), 1)
    sync.distributed = True  # (one rank: the fake all-reduce leaves its own numbers)
    sync.watch = WaitWatch(rank=0, first=0.001)
    thread = threading.Thread(target=sync.start, args=(True, 5, 15))
    thread.start()
    try:
        assert said.warned.wait(WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    assert "the stop agreement" in said.messages[0], said.messages
    assert sync.result() == (True, 5, 15)  # what the agreement says, watched or not
    assert sync.collectives == 1


@pytest.mark.timeout(60)
def test_a_wait_says_its_own_usual_cause_and_what_to_do(said: Said) -> None:
    watch = WaitWatch(rank=0, first=0.001)
    with watch.waiting("the other ranks at a save", CHECKPOINT_USUAL):
        assert said.warned.wait(WAIT)
    first = said.messages[0]
    assert "the other ranks at a save" in first and CHECKPOINT_USUAL in first, first
    assert "waiting for its data" not in first, first  # (the stop agreement's cause)
    assert "kill -CONT PID" in first and "py-spy dump --pid PID" in first, first
    said.messages.clear()
    said.warned.clear()
    with watch.waiting("the stop agreement"):  # (the default: the agreement's cause)
        assert said.warned.wait(WAIT)
    assert AGREEMENT_USUAL in said.messages[0], said.messages


@pytest.mark.timeout(60)
def test_a_wait_begun_inside_another_leaves_the_outer_one_watched(said: Said) -> None:
    watch = WaitWatch(rank=2, first=0.001)
    with watch.waiting("the outer wait"), watch.waiting("the inner wait"):
        assert said.warned.wait(WAIT)
    assert all("the inner wait" not in m for m in said.messages), said.messages
    assert "the outer wait" in said.messages[0], said.messages
    assert said.messages[-1].startswith("rank 2: the outer wait arrived"), said.messages
    said.messages.clear()
    said.warned.clear()
    with watch.waiting("the next wait"):  # (the watch is free again)
        assert said.warned.wait(WAIT)
    assert "the next wait" in said.messages[0], said.messages


class Roll:
    """A roll call (`RollCall`) that records what it was told and names ranks 1 and 3."""

    world = 4

    def __init__(self) -> None:
        self.arrived_at: list[int] = []
        self.asked: list[int] = []
        self.looks = 0  # (`held`: the looks during a wait)
        self.looked = threading.Event()

    def arrived(self, wait: int) -> None:
        self.arrived_at.append(wait)

    def late(self, wait: int) -> list[int] | None:
        self.asked.append(wait)
        return [1, 3]

    def held(self) -> None:
        self.looks += 1
        self.looked.set()


@pytest.mark.timeout(60)
def test_a_roll_call_names_the_ranks_likely_late(said: Said) -> None:
    roll = Roll()
    watch = WaitWatch(rank=0, first=0.001, roll=roll)
    with watch.waiting("nothing long"):
        pass
    with watch.waiting("the other ranks at a save", CHECKPOINT_USUAL):
        assert said.warned.wait(WAIT)
    assert "another rank (likely late: ranks 1, 3) has not reached it" in said.messages[0]
    # this rank told its second wait, once, and asked about it: the ranks not at it
    assert roll.arrived_at == [2] and roll.asked[0] == 2, (roll.arrived_at, roll.asked)


@pytest.mark.timeout(60)
def test_a_roll_call_is_told_of_each_look_during_a_wait_every_roll_look_at_most() -> None:
    """A watch with a roll call looks every `ROLL_LOOK` s (not `first` / 4, 15 s at the
    default `first`) and tells it at each look during a wait (`RollCall.held`: a rank
    held there reads rank 0's refusal mark then: tests/trainer/test_refusal_alone_read.py).
    With `first` at an hour, a look every 15 minutes would not come within the timeout."""
    roll = Roll()
    watch = WaitWatch(rank=0, first=3600.0, roll=roll)
    with watch.waiting("the other ranks at the stop agreement"):
        assert roll.looked.wait(WAIT)
    assert roll.looks >= 1 and roll.arrived_at == [1], (roll.looks, roll.arrived_at)


def test_the_looks_of_many_ranks_are_spaced_to_keep_the_store_under_its_rate() -> None:
    """Every held rank's look asks the launcher's store once: `ROLL_LOOK` apart up to
    ``STORE_RATE * ROLL_LOOK`` ranks, then ``world / STORE_RATE`` s, so that the ranks
    together never ask more than `STORE_RATE` times a second. Before, 0.5 s at any
    world: 8,192 requests a second at 4,096 ranks, 14% of a core of the store's host
    with other processes on its cores (benchmarks/store_traffic.py)."""
    from melissa_trainer.core.roll_call import ROLL_LOOK, STORE_RATE, roll_look

    assert roll_look(1) == roll_look(2) == ROLL_LOOK
    assert roll_look(int(STORE_RATE * ROLL_LOOK)) == ROLL_LOOK
    for world in (2048, 4096, 32_768):
        assert world / roll_look(world) == pytest.approx(STORE_RATE)
    assert roll_look(4096) == pytest.approx(2.0)
