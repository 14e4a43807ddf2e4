"""`SilenceClock`'s bound once an attempt's data is complete: its exit, bounded as a
start-up is, not as a silence between two messages (`melissa_trainer.launcher.silence`)."""

from __future__ import annotations

from pathlib import Path

from melissa_trainer.launcher.expected_silence import explain_silence
from melissa_trainer.launcher.jobs import RunningJob
from melissa_trainer.launcher.silence import SilenceClock


def clock(timeout: float | str | None = "auto", startup: float | None = 600.0) -> SilenceClock:
    return SilenceClock(
        timeout, floor=1.0, factor=10.0, startup=startup, poll_interval=0.05, heartbeat=True
    )


def test_an_attempt_whose_data_is_complete_is_bounded_as_a_start_up() -> None:
    c = clock()
    c.heard(0.2, first=False)  # the longest silence between two messages seen
    c.heard(4.0, first=True)  # the longest start-up seen
    between = c.bound(sending=True)
    assert between is not None and between[0] == 2.0
    bound = c.bound(sending=True, complete=True)
    assert bound is not None and bound[0] == 600.0
    assert "after its last step, its data complete: max(startup_timeout=600.0" in bound[1]
    assert c.judge(2.5, sending=True) is not None  # mid-stream: a hang
    assert c.judge(2.5, sending=True, complete=True) is None  # ending: its exit
    verdict = c.judge(601.0, sending=True, complete=True)
    assert verdict is not None and verdict.timeout == 600.0


def test_a_fixed_timeout_or_none_applies_as_before() -> None:
    fixed = clock(5.0).bound(sending=True, complete=True)
    assert fixed == (5.0, "simulation_timeout=5.0")
    assert clock(None).bound(sending=True, complete=True) is None
    assert clock(startup=None).bound(sending=True, complete=True) is None  # no start-up bound


def test_the_stream_waiting_for_simulations_ending_is_explained_within_their_allowance() -> None:
    """The stall watchdog is told why the stream is silent while every job alive is an
    attempt whose data is complete and that is ending (its own output, its exit), within
    the allowance the launcher enforces; not past it, nor for a job mid-stream."""

    def job(silent: float, complete: bool) -> RunningJob:
        out = RunningJob(handle=0, simulation_id=0, log_path=Path("x.log"))  # type: ignore[arg-type]
        out.silent, out.sending, out.complete = silent, True, complete
        return out

    c = clock(startup=10.0)
    why = explain_silence({"a": job(9.0, complete=True)}, c, lambda h: True, {}, 0.0)
    assert why is not None and "1 simulation(s) ending, their data complete" in why
    assert explain_silence({"a": job(10.5, complete=True)}, c, lambda h: True, {}, 0.0) is None
    assert explain_silence({"a": job(0.5, complete=False)}, c, lambda h: True, {}, 0.0) is None
    assert RunningJob(handle=0, simulation_id=0, log_path=Path("x.log")).complete is False  # type: ignore[arg-type]
