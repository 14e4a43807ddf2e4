"""A window's steps run inside the trainer's wait watch as a span of steps
(`WaitWatch.stepping`, armed by `trainer.run_waits.run_window` under several ranks): a
rank that completes no step for long warns ("has completed no step"), then says when
its steps went on. On a CPU run a rank whose peer stopped mid-window waits in DDP's
backward, which no wait watches: before, it waited silently until the process group's
timeout.

The contract read back here: nothing is judged before the first step after the span's
`after` (a first step's compile: however long it lasts), nor while an action point
pauses the span (`pause`, `TrainerActions._perform_requested_actions`), nor after the
span; the bound grows with the slowest step seen. Steps are a counter the test moves;
a step "hangs" on an event, never on a sleep. The real two-rank run:
tests/trainer/test_stopped_rank_watch.py (mode ``steps``)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: wait_said
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/trainer
from test_checkpoint_wait_watch import trained  # noqa: E402
from wait_said import WAIT, Said  # noqa: E402

from melissa_trainer.core.wait_watch import WaitWatch  # noqa: E402
from melissa_trainer.trainer.run_waits import run_window  # noqa: E402


def looks(watch: WaitWatch, n: int) -> None:
    """Wait until the watch's thread has looked `n` times more (its looks are counted
    through a wrapped `_look_at_steps`): never a guess of the time it takes."""
    seen = threading.Semaphore(0)
    look = watch._look_at_steps

    def counted(*a: object) -> object:
        try:
            return look(*a)  # type: ignore[arg-type]
        finally:
            seen.release()

    watch._look_at_steps = counted  # type: ignore[method-assign]
    try:
        for _ in range(n):
            assert seen.acquire(timeout=WAIT)
    finally:
        watch._look_at_steps = look  # type: ignore[method-assign]


@pytest.mark.timeout(60)
def test_a_first_step_is_never_judged_a_later_one_is(said: Said) -> None:
    watch = WaitWatch(rank=0, first=0.01)
    done = [5]  # (a resumed run's count: judged after 5)
    with watch.stepping(lambda: done[0], after=5):
        looks(watch, 40)  # 100 bounds of a first step (a compile): not judged
        assert said.messages == [], said.messages
        done[0] = 6  # the first step completed; the second hangs
        text = said.heard("has completed no step", WAIT)
        assert text is not None and text.startswith("rank 0 has completed no step for"), text
        assert "(in step 7;" in text and "DDP's backward all-reduce" in text, text
        assert "A step much slower than those before" in text and "kill -CONT PID" in text
        done[0] = 7
        assert said.heard("rank 0: step 7 completed after", WAIT), said.messages


@pytest.mark.timeout(60)
def test_an_action_point_a_wait_and_the_spans_end_are_not_judged(said: Said) -> None:
    watch = WaitWatch(rank=0, first=0.01)
    done = [1]
    with watch.stepping(lambda: done[0], after=0):
        with watch.pause():  # an action point: a save, a validation
            looks(watch, 40)
        with watch.waiting("the other ranks at a test's wait", "usual words"):
            said.heard("has waited", WAIT)
        assert not any("completed no step" in m for m in said.messages), said.messages
    deadline = time.monotonic() + WAIT  # after the span: the thread ends, idle
    while watch._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch._thread is None
    assert not any("completed no step" in m for m in said.messages), said.messages


@pytest.mark.timeout(60)
def test_the_bound_grows_with_the_slowest_step_seen(said: Said) -> None:
    watch = WaitWatch(rank=0, first=0.01)
    done = [1]
    with watch.stepping(lambda: done[0], after=0):
        looks(watch, 2)
        # (a slow step: it lasts until the watch has judged it a stall, past the 0.01 s
        # bound; an event, not a sleep the thread might not look within)
        assert said.heard("has completed no step", WAIT), said.messages
        done[0] = 2
        looks(watch, 2)
        slowest = watch._clock.slowest
        assert slowest > 0.01, slowest  # judged a stall: it lasted past the first bound
        assert watch._clock.bound == pytest.approx(4 * slowest), watch._clock.bound
        assert watch._clock.bound > 0.04, watch._clock.bound  # grown from 0.01
    assert said.heard("rank 0: step 2 completed after", WAIT), said.messages


@pytest.mark.timeout(120)
def test_a_window_is_a_span_and_its_action_points_pause_it(tmp_path: Path, said: Said) -> None:
    trainer = trained(tmp_path)  # (2 steps done; `distributed` set)
    watch = trainer.stop_sync.watch = WaitWatch(rank=0, first=0.01)
    seen: list[tuple[object, int]] = []
    release = threading.Event()

    def step(stage_next: bool = False) -> None:
        seen.append((watch._span, watch._paused))
        if trainer.state.global_step == 3:  # the window's second step hangs (a peer)
            assert release.wait(WAIT)
        trainer.state.global_step += 1

    thread = threading.Thread(target=run_window, args=(trainer, 2, 2, step))
    thread.start()
    try:
        text = said.heard("has completed no step", WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    assert text is not None and "(in step 4;" in text, said.messages
    assert [p for s, p in seen] == [0, 0] and all(s is not None for s, _ in seen), seen
    assert watch._span is None  # (disarmed after the window)
    acting: list[int] = []
    trainer._act = lambda control: acting.append(watch._paused)  # type: ignore[method-assign]
    trainer.control.should_log = True
    trainer._perform_requested_actions()
    assert acting == [1] and watch._paused == 0, acting
    single = SimpleNamespace(stop_sync=SimpleNamespace(distributed=False), state=trainer.state)
    run_window(single, 1, 0, lambda stage_next=False: seen.append((watch._span, 9)))  # type: ignore[arg-type]  # (one process: no span)
    assert seen[-1] == (None, 9), seen


@pytest.mark.timeout(60)
def test_a_stall_that_ends_with_the_span_is_said_at_once(said: Said) -> None:
    """The stalled step completes and the span ends (the window's last step, the run's
    end) before the thread's next look, a quarter of `first` away: its end is said as
    the span ends. Before, a run whose process exited within that quarter never said it
    (tests/trainer/test_stopped_rank_watch.py's mode ``steps`` failed in CI so)."""
    watch = WaitWatch(rank=0, first=1.0)  # (the thread looks every 0.25 s)
    done = [1]
    with watch.stepping(lambda: done[0], after=0):
        done[0] = 2  # the first step judged completed; the next hangs
        assert said.heard("has completed no step", WAIT), said.messages
        done[0] = 3
    # (no wait: said by the span's end itself, not by a look to come)
    assert any(m.startswith("rank 0: step 3 completed after") for m in said.messages), said.messages


@pytest.mark.timeout(120)
def test_a_rank_held_in_a_hook_names_the_hook(tmp_path: Path, said: Said) -> None:
    """A user's trial, 2 gloo ranks: a hook slow on rank 1 (a sleep in its on_step_end)
    made rank 1 say it "may wait in its step's collectives ... for another rank", as
    rank 0 did, so that neither looked late. The rank in a hook method says so, naming
    it (`run_window`'s `doing`): this test failed before."""
    from melissa_trainer.hooks import Event, Hook

    trainer = trained(tmp_path)  # (2 steps done; `distributed` set)
    trainer.stop_sync.watch = WaitWatch(rank=1, first=0.01)
    release = threading.Event()

    class SlowOnRankOne(Hook):
        def on_step_end(self, trainer: object, state: object, control: object) -> None:
            assert release.wait(WAIT)  # (a slow hook: held until the warning is heard)

    trainer.hooks.add(SlowOnRankOne())

    def step(stage_next: bool = False) -> None:
        trainer.state.global_step += 1
        if trainer.state.global_step == 4:
            trainer.hooks.fire(Event.STEP_END, trainer, trainer.state, trainer.control)

    thread = threading.Thread(target=run_window, args=(trainer, 2, 2, step))
    thread.start()
    try:
        text = said.heard("has completed no step", WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    assert text is not None, said.messages
    assert text.startswith("rank 1 has completed no step for") and "(after step 4)" in text, text
    assert "in the hook method SlowOnRankOne.on_step_end" in text, text
    assert "holds every other rank at its next collective" in text, text
    assert "DDP's backward" not in text, text  # (not "it may wait in its collectives")
