"""What the launcher tells each job of its silence bound (``MELISSA_TRAINER_SILENCE_S``:
`SilenceClock.shortest`, `templates.silence_env`), which a rerun paces its sign of life
by (`melissa_trainer.client.rerun`): the smaller of the start-up allowance and the bound
between two messages, none when neither has one, in the form the client reads back
(`launched_env.check_silence`)."""

from __future__ import annotations

import pytest

from melissa_trainer.client.launched_env import ENV_SILENCE, check_silence
from melissa_trainer.launcher.silence import STARTUP_DEFAULT, SilenceClock
from melissa_trainer.launcher.templates import silence_env, simulation_env


def clock(timeout: float | str | None, startup: float | None = STARTUP_DEFAULT) -> SilenceClock:
    return SilenceClock(
        timeout, floor=120.0, factor=10.0, startup=startup, poll_interval=0.05, heartbeat=True
    )


@pytest.mark.parametrize(
    ("timeout", "startup", "shortest"),
    [
        (6.0, 7.0, 6.0),  # (the trial: max(6, 7) before the first message, 6 between)
        (6.0, STARTUP_DEFAULT, 6.0),  # (a numeric timeout bounds the start-up too)
        (30.0, None, 30.0),  # (no start-up bound: the one between two messages)
        ("auto", STARTUP_DEFAULT, 120.0),  # (the defaults: the floor, 600 s before)
        ("auto", 60.0, 60.0),
        ("auto", None, 120.0),
        (None, 60.0, None),  # (never killed: nothing told)
    ],
)
def test_the_shortest_bound_is_told(
    timeout: float | str | None, startup: float | None, shortest: float | None
) -> None:
    assert clock(timeout, startup).shortest() == shortest


def test_the_auto_bound_told_grows_with_what_the_study_saw() -> None:
    c = clock("auto", 60.0)
    c.heard(9.0, first=True)  # a start-up of 9 s: 90 s allowed before a first message
    c.heard(20.0, first=False)  # a silence of 20 s: 200 s between two messages
    assert c.shortest() == 90.0


@pytest.mark.parametrize(
    ("bound", "text"),
    [(6.0, "6"), (0.25, "0.25"), (120.0, "120"), (1 / 3, "0.333"), (1e-6, "0.001")],
)
def test_the_bound_is_told_as_the_client_reads_it(
    monkeypatch: pytest.MonkeyPatch, bound: float, text: str
) -> None:
    env = simulation_env(3, {"k": 1.0}, "/tmp/r", 1, bound)
    assert env[ENV_SILENCE] == text
    monkeypatch.setenv(ENV_SILENCE, env[ENV_SILENCE])
    assert check_silence() == float(text)


def test_no_bound_is_told_as_none() -> None:
    assert silence_env(None) == {}
    assert ENV_SILENCE not in simulation_env(3, {"k": 1.0}, "/tmp/r", 1)
