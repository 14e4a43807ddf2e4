"""`RerunSkip` sends its signs of life to receiver 0 only, the one the launcher hears
(`melissa_trainer.client.rerun`): which steps of a rerun go out, under each routing
(`wire.routing.receiver_of`), with a clock of the test's (`rerun.time`) and every step
held unless said. The oracle: the routing's formula written out here, ``(s + t) % W``
or ``t % W``, and the steps a receiver lacks by hand.

Before, a sign of life was due on any receiver's held step once the interval had passed
since the client's last send to any receiver: with two ranks and a constant step time,
every one could land on receiver 1's steps (the first below: steps 0, 2, 4 ...), and the
launcher, hearing rank 0's receiver alone, killed the rerun as hung."""

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
    ("sid", "routing", "world"),
    [(5, SIMULATION_STEP, 2), (4, SIMULATION_STEP, 2), (5, None, 2), (7, SIMULATION_STEP, 3)],
)
def test_each_sign_of_life_is_a_step_of_receiver_0(
    clock: Clock, sid: int, routing: str | None, world: int
) -> None:
    skip, transport = skip_of(sid, routing, finished(sid, world), clock)
    got = sent(skip, clock, range(12))
    shift = sid % world if routing == SIMULATION_STEP else 0
    to_0 = [t for t in range(12) if (t + shift) % world == 0]
    assert to_0 and all(t in to_0 for t in got), got
    # the first of receiver 0's at once; then one each time INTERVAL s had passed since
    # the last: W steps apart (W x STEP >= INTERVAL), every one of them with W = 2 or 3
    assert got == to_0, (got, to_0)
    assert (skip.signs, skip.skipped) == (len(got), 12 - len(got))
    assert sum(s.count for s in transport.steps) == 12 - len(got)  # (the sent: added later)


def test_a_fast_rerun_sends_receiver_0s_first_held_step_only(clock: Clock) -> None:
    sid = 5  # ((5 + t) % 2: step 0 to receiver 1, step 1 to receiver 0)
    skip, _ = skip_of(sid, SIMULATION_STEP, finished(sid, 2), clock)
    for t in range(10):
        clock.now += 0.01  # (a fast solver: well within INTERVAL)
        assert skip(t) is (t != 1), t


def test_a_step_of_receiver_0_not_held_restarts_its_clock(clock: Clock) -> None:
    """Receiver 0 (routing ``t % 2``: its local step i is time step 2i) lacks step 4 (its
    local step 2): sent as any step, it is a message rank 0 hears, so the next sign of
    life is due an interval after it, not after the last sign. Receiver 1 lacks step 7
    (its local step 3): its send does not restart receiver 0's clock (before, it did)."""
    sid = 4
    rank0 = HeldReply(sid, 0, 0, 2, HELD_STEPS, 8, bytes([0b11111011]))
    rank1 = HeldReply(sid, 0, 1, 2, HELD_STEPS, 8, bytes([0b11110111]))
    skip, _ = skip_of(sid, None, [rank0, rank1], clock)
    steps = [0.1, 0.1, 0.1, 0.1, 0.5, 0.5, 0.4, 0.1, 0.1, 0.1]  # (s before each step)
    out = []
    for t, dt in enumerate(steps):
        clock.now += dt
        if not skip(t):
            out.append(t)
    # step 0: the first; 4 and 7 not held; 6 is 0.9 s after 4: skipped, though 1.7 s
    # after the last sign (0); 8 is 1.1 s after 4, 0.1 s after 7: a sign of life
    assert out == [0, 4, 7, 8], out
    assert (skip.signs, skip.skipped) == (2, 6)


def test_held_steps_that_never_route_to_receiver_0_are_all_skipped(clock: Clock) -> None:
    """A simulation of one step routed ``(s + t) % W`` to receiver 1 (s = 3, W = 2): held,
    it is not sent, first send or not: rank 0 would not hear it (nor did it hear the
    first attempt's). Counted in receiver 1's BYE."""
    skip, transport = skip_of(3, SIMULATION_STEP, finished(3, 2), clock)
    clock.now += 60.0  # (past any interval)
    assert skip(0) is True
    assert (skip.signs, skip.skipped) == (0, 1)
    assert [s.count for s in transport.steps] == [0, 1]


def test_without_pace_only_the_first_step_of_receiver_0_goes(clock: Clock) -> None:
    """With a communicator before the parts are placed (``pace=False``: the ranks' clocks
    differ), a sign of life by the clock is never sent; the first held step of receiver
    0 is, on every rank: it depends on the step and the simulation id only."""
    skip, _ = skip_of(5, SIMULATION_STEP, finished(5, 2), clock)
    assert sent(skip, clock, range(8), pace=False) == [1]
