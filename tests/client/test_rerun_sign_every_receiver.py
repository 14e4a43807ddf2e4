"""`RerunSkip` sends its signs of life to whichever receiver the step at hand is routed
to, every rank's receiver being heard by the launcher (`stream.rank_activity`,
`melissa_trainer.client.rerun`): which steps of a rerun go out, under each routing
(`wire.routing.receiver_of`), with a clock of the test's (`rerun.time`) and every step
held unless said. The oracle: the routing's formula written out here, ``(s + t) % W``
or ``t % W``, the steps a receiver lacks by hand, and the clock's arithmetic.

Before, the signs went to receiver 0 only (the launcher heard rank 0's receiver alone):
a rerun whose held steps never routed there (every step of a simulation routed
``(s + t) % 2`` to receiver 1, or the held tail of a longer one) sent none, and was
killed as hung on every attempt when its solver recomputed them for longer than the
bound (tests/launcher/test_rerun_sign_every_rank_e2e.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from melissa_trainer.client import rerun
from melissa_trainer.client.fast_send import SendClock
from melissa_trainer.client.rerun import RerunSkip
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire import HELD_FINISHED, HELD_STEPS, HeldReply
from melissa_trainer.wire.routing import SIMULATION_STEP

pytestmark = pytest.mark.timeout(30)

#: a solver's step (s of the test's clock) and the interval of the signs of life
STEP, INTERVAL = 0.6, 1.0


class Clock:
    """`time.monotonic` of the test: `now`, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(rerun, "time", made)
    return made


def skip_of(
    sid: int, routing: str | None, replies: list[HeldReply], clock: Clock
) -> tuple[RerunSkip, SimpleNamespace]:
    transport = SimpleNamespace(
        steps=[StepSet() for _ in replies], clock=SendClock(), opened=clock.now
    )
    return RerunSkip(replies, sid, routing, transport, INTERVAL), transport  # type: ignore[arg-type]


def finished(sid: int, world: int) -> list[HeldReply]:
    return [HeldReply(sid, 0, r, world, HELD_FINISHED, 0, b"") for r in range(world)]


def sent(skip: RerunSkip, clock: Clock, steps: range, pace: bool = True) -> list[int]:
    """The steps `skip` lets out, one each `STEP` s (the solver's compute first)."""
    out = []
    for t in steps:
        clock.now += STEP
        if not skip(t, pace):
            out.append(t)
    return out


@pytest.mark.parametrize(
    ("sid", "routing", "world", "to"),
    [
        (5, SIMULATION_STEP, 2, {1}),  # (every one to receiver 1: before, none was sent)
        (4, SIMULATION_STEP, 2, {0}),
        (5, None, 2, {0}),
        (7, SIMULATION_STEP, 3, {0, 1, 2}),
    ],
)
def test_a_sign_of_life_goes_to_the_receiver_of_the_step_at_hand(
    clock: Clock, sid: int, routing: str | None, world: int, to: set[int]
) -> None:
    skip, transport = skip_of(sid, routing, finished(sid, world), clock)
    got = sent(skip, clock, range(12))
    # the first at once; then one each time INTERVAL s had passed since the last send:
    # 2 steps apart (2 x STEP >= INTERVAL > STEP), whatever receiver each goes to
    assert got == [0, 2, 4, 6, 8, 10], got
    shift = sid % world if routing == SIMULATION_STEP else 0
    assert {(t + shift) % world for t in got} == to
    assert (skip.signs, skip.skipped) == (len(got), 12 - len(got))
    assert sum(s.count for s in transport.steps) == 12 - len(got)  # (the sent: added later)


def test_a_fast_rerun_sends_its_first_held_step_only(clock: Clock) -> None:
    sid = 5  # ((5 + t) % 2: step 0 to receiver 1, step 1 to receiver 0)
    skip, _ = skip_of(sid, SIMULATION_STEP, finished(sid, 2), clock)
    for t in range(10):
        clock.now += 0.01  # (a fast solver: well within INTERVAL)
        assert skip(t) is (t != 0), t


def test_a_step_not_held_restarts_the_clock(clock: Clock) -> None:
    """Receiver 0 (routing ``t % 2``: its local step i is time step 2i) lacks step 4 (its
    local step 2), receiver 1 step 7 (its local step 3): each sent as any step, a message
    the launcher hears, so the next sign of life is due an interval after it."""
    sid = 4
    rank0 = HeldReply(sid, 0, 0, 2, HELD_STEPS, 8, bytes([0b11111011]))
    rank1 = HeldReply(sid, 0, 1, 2, HELD_STEPS, 8, bytes([0b11110111]))
    skip, _ = skip_of(sid, None, [rank0, rank1], clock)
    steps = [0.1, 0.1, 0.1, 0.1, 0.5, 0.5, 0.4, 0.1, 0.1, 1.0]  # (s before each step)
    out = []
    for t, dt in enumerate(steps):
        clock.now += dt
        if not skip(t):
            out.append(t)
    # step 0: the first (at 0.1 s); 4 (0.9 s) and 7 (1.9 s) not held; 6 (1.8 s) is 0.9 s
    # after 4: skipped, though 1.7 s after the first; 8 (2.0 s) 0.1 s after 7: skipped;
    # 9 (3.0 s), 1.1 s after 7: a sign of life
    assert out == [0, 4, 7, 9], out
    assert (skip.signs, skip.skipped) == (2, 6)


def test_a_held_step_routed_to_receiver_1_is_a_sign_of_life(clock: Clock) -> None:
    """A simulation of one step routed ``(s + t) % W`` to receiver 1 (s = 3, W = 2):
    held, its first send goes out anyway (the launcher hears receiver 1). Before, it was
    skipped (rank 0 would not have heard it): the rerun sent nothing."""
    skip, transport = skip_of(3, SIMULATION_STEP, finished(3, 2), clock)
    clock.now += 60.0  # (past any interval)
    assert skip(0) is False
    assert (skip.signs, skip.skipped) == (1, 0)
    assert [s.count for s in transport.steps] == [0, 0]  # (the sent: added by its send)


def test_without_pace_only_the_first_step_goes(clock: Clock) -> None:
    """With a communicator before the parts are placed (``pace=False``: the ranks' clocks
    differ), a sign of life by the clock is never sent; the first held step is, on every
    rank: the same call on each."""
    skip, _ = skip_of(5, SIMULATION_STEP, finished(5, 2), clock)
    assert sent(skip, clock, range(8), pace=False) == [0]
