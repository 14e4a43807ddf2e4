"""`IdleClock`: idle time counts empty polls only; a stall raises with what is awaited."""

from __future__ import annotations

import pytest

from melissa_trainer.stream import watchdog
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.watchdog import IdleClock, StallError


def test_idle_time_runs_between_empty_polls_and_restarts_with_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(watchdog.time, "monotonic", lambda: now[0])
    clock = IdleClock(None)
    assert clock.empty_poll(5) == 0.0
    now[0] += 1.5
    assert clock.empty_poll(5) == 1.5 and clock.idle_seconds(5) == 1.5
    assert clock.idle_seconds(6) == 0.0  # a message since the last empty poll
    now[0] += 1.0
    assert clock.empty_poll(6) == 0.0  # messages came: the clock restarts
    now[0] += 3.0  # no empty poll lately (blocked on a full buffer): not idle
    assert clock.idle_seconds(6) == 0.0


def test_a_stall_names_the_simulations_awaited() -> None:
    ingest = Ingest(
        0,
        1,
        put=lambda s: True,
        end=lambda why: None,
        expected=3,
        max_field_bytes=1 << 20,
        max_pending=16,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 10,
        recent_size=16,
    )
    clock = IdleClock(2.0)
    clock.check(1.9, ingest)  # not yet
    with pytest.raises(StallError, match=r"no message for 3 s \(stall_timeout=2.0\).*0 of 3"):
        clock.check(3.0, ingest)
    IdleClock(None).check(1e9, ingest)  # never


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "60", True])
def test_a_bad_stall_timeout_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match="stall_timeout must be a number of seconds"):
        IdleClock(bad)  # type: ignore[arg-type]
