"""`SilenceClock`'s bound once an attempt's data is complete: its exit, bounded as a
start-up is, not as a silence between two messages; and before its first message under
a numeric `simulation_timeout`: the `startup_timeout` the user set is honoured
(`melissa_trainer.launcher.silence`; `test_startup_allowance.py` runs real solvers)."""

from __future__ import annotations

import dataclasses
import pickle
import re
from pathlib import Path

import pytest

from melissa_trainer.launcher import LauncherTuning
from melissa_trainer.launcher.expected_silence import explain_silence
from melissa_trainer.launcher.jobs import RunningJob
from melissa_trainer.launcher.silence import STARTUP_DEFAULT, SilenceClock
from melissa_trainer.study.launch import other_rank_excuse


def clock(
    timeout: float | str | None = "auto", startup: float | None = STARTUP_DEFAULT
) -> SilenceClock:
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
    assert why is not None and "1 simulation ending, its data complete" in why
    assert explain_silence({"a": job(10.5, complete=True)}, c, lambda h: True, {}, 0.0) is None
    assert explain_silence({"a": job(0.5, complete=False)}, c, lambda h: True, {}, 0.0) is None
    assert RunningJob(handle=0, simulation_id=0, log_path=Path("x.log")).complete is False  # type: ignore[arg-type]


def test_a_numeric_timeout_bounds_the_start_up_while_startup_timeout_is_unset() -> None:
    """Left at its default, `startup_timeout` changes nothing under a numeric timeout
    (the default, 600 s, would have every such study wait 10 minutes for a hung
    start-up): the bound is the timeout everywhere, and before a first message the rule
    says so and names both fixes."""
    c = clock(10.0)
    start = c.bound(sending=False)
    assert start is not None and start[0] == 10.0
    assert "simulation_timeout=10.0, before its first message" in start[1]
    assert "bounds the start-up too while startup_timeout is unset" in start[1]
    assert "LauncherTuning(startup_timeout=...)" in start[1]
    assert "or a larger simulation_timeout" in start[1]
    assert c.bound(sending=True) == (10.0, "simulation_timeout=10.0")
    assert c.bound(sending=True, complete=True) == (10.0, "simulation_timeout=10.0")


def test_a_startup_timeout_the_user_set_bounds_the_start_up_under_a_numeric_timeout() -> None:
    """The trial's setting: simulation_timeout=10, startup_timeout=60. Before a first
    message (and once the data is complete: the exit) the bound is the larger; between
    two messages the timeout alone. The user's None: no bound before a first message."""
    c = clock(10.0, startup=60.0)
    start = c.bound(sending=False)
    assert start is not None and start[0] == 60.0
    assert start[1].startswith("max(simulation_timeout=10.0, startup_timeout=60.0), before")
    assert "a slower start-up needs a larger startup_timeout" in start[1]
    assert c.judge(15.0, sending=False) is None  # the trial's mesh load: survives
    verdict = c.judge(61.0, sending=False)
    assert verdict is not None and verdict.timeout == 60.0
    assert c.bound(sending=True) == (10.0, "simulation_timeout=10.0")
    ending = c.bound(sending=True, complete=True)
    assert ending is not None and ending[0] == 60.0 and "its data complete" in ending[1]
    assert clock(600.0, startup=600.0).bound(sending=False) is not None  # (600 set: max)
    unbounded = clock(10.0, startup=None)
    assert unbounded.bound(sending=False) is None
    assert unbounded.bound(sending=True) == (10.0, "simulation_timeout=10.0")


def test_auto_is_unchanged_whether_startup_timeout_was_set_or_not() -> None:
    for startup in (STARTUP_DEFAULT, 600.0):
        c = clock(startup=startup)
        c.heard(100.0, first=True)
        start = c.bound(sending=False)
        assert start is not None and start[0] == 1000.0  # silence_factor x the longest
        assert start[1].startswith("simulation_timeout='auto', before its first message")
        between = c.bound(sending=True)
        assert between is not None and between[0] == 1.0  # (silence_floor)


def test_launcher_tuning_tells_a_startup_timeout_set_from_its_default() -> None:
    """The default is a `silence.Default` (600.0, equal to it); `dataclasses.replace` and
    pickling keep it so; `startup_allowance` is the start-up bound as set, which the
    other ranks' stall watchdogs use."""
    unset = LauncherTuning(simulation_timeout=10)
    assert unset.startup_timeout == 600.0 and not unset.startup_set
    assert unset.startup_allowance() == 10.0
    assert not dataclasses.replace(unset, max_restarts=0).startup_set
    assert not pickle.loads(pickle.dumps(unset)).startup_set
    user = LauncherTuning(simulation_timeout=10, startup_timeout=60)
    assert user.startup_set and user.startup_allowance() == 60.0
    assert isinstance(user.startup_timeout, float) and user.startup_timeout == 60.0
    assert LauncherTuning(simulation_timeout=10, startup_timeout=None).startup_allowance() is None
    assert LauncherTuning().startup_allowance() == 600.0  # "auto": its least
    assert LauncherTuning(simulation_timeout=None).startup_allowance() is None
    excuse = other_rank_excuse(user)
    assert excuse is not None and excuse(59.0) is not None and excuse(61.0) is None


@pytest.mark.parametrize(
    ("tuning", "match"),
    [
        (
            {"simulation_timeout": None, "startup_timeout": 60},
            r"^LauncherTuning.startup_timeout=60.0 bounds nothing with simulation_timeout="
            r"None .* set simulation_timeout='auto' or a number of seconds",
        ),
        (
            {"simulation_timeout": 30, "startup_timeout": 10},
            r"^LauncherTuning.startup_timeout=10.0 is below simulation_timeout=30.0: .* set "
            r"startup_timeout above simulation_timeout .*, or leave it unset",
        ),
    ],
)
def test_a_startup_timeout_that_would_bound_nothing_is_refused(
    tuning: dict[str, object], match: str
) -> None:
    """A setting that cannot do what it says fails when made (and by `replace`), naming
    the field and the fix: with no timeout nothing is killed, and below a numeric
    timeout the start-up is allowed the timeout anyway."""
    with pytest.raises(ValueError, match=match):
        LauncherTuning(**tuning)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(LauncherTuning(), **tuning)  # type: ignore[arg-type]
    LauncherTuning(simulation_timeout=None, startup_timeout=None)  # (both: no bound)
    LauncherTuning(simulation_timeout=30, startup_timeout=30)  # (equal: allowed)


def test_the_first_data_notice_names_the_bound_on_a_start_up() -> None:
    """Rank 0's "no data yet" notice says which setting bounds the start-up (the
    trial's said "LauncherTuning.simulation_timeout" only, with startup_timeout=60 set
    and ignored)."""
    from types import SimpleNamespace

    from melissa_trainer.study.first_data import startup_allowance

    def said(**tuning: object) -> str:
        return startup_allowance(SimpleNamespace(tuning=LauncherTuning(**tuning)))  # type: ignore[arg-type]

    unset = said(simulation_timeout=10)
    assert "nothing for 10 s is killed as hung" in unset
    assert "bounds the start-up too while startup_timeout is unset" in unset
    user = said(simulation_timeout=10, startup_timeout=60)
    assert "nothing for 60 s before its first message" in user
    assert "max(simulation_timeout, startup_timeout)" in user
    assert "startup_timeout=None" in said(simulation_timeout=10, startup_timeout=None)
    assert "nothing for 600 s is killed" in said()  # "auto": as before


def test_the_sooner_bound_names_the_setting_that_sets_the_bound() -> None:
    """The kill's "catches a hang sooner" (`SilenceClock.sooner`) names what would lower
    the bound: under "auto", `silence_floor` while the floor sets it; once silence_factor
    x the study's longest silence sets it, nothing (a lower floor changes nothing, a trial
    run with silence_floor=6 and a 1.1 s silence seen was told silence_floor=9, bound
    11 s; and a numeric `simulation_timeout` below it would kill a silence of a simulation
    of the study with less than silence_factor's margin); nothing when no tighter bound
    follows."""
    floor_set = SilenceClock(
        "auto", floor=120.0, factor=10.0, startup=STARTUP_DEFAULT, poll_interval=0.05,
        heartbeat=True,
    )  # fmt: skip
    floor_set.heard(0.6, first=False)
    (bound, _), sooner = floor_set.bound(True), floor_set.sooner(0.6, 120.0)
    assert bound == 120.0 and "LauncherTuning(silence_floor=6)" in sooner
    assert "after 6 s instead of 120 s" in sooner
    factor_set = SilenceClock(
        "auto", floor=6.0, factor=10.0, startup=STARTUP_DEFAULT, poll_interval=0.05,
        heartbeat=True,
    )  # fmt: skip
    factor_set.heard(1.1, first=False)
    (bound, _) = factor_set.bound(True)
    assert factor_set.sooner(0.9, bound) == ""  # the study's 1.1 s: 11 s, no tighter
    assert factor_set.sooner(1.1, bound) == ""
    none_seen = clock()
    assert "no silence between two messages seen yet" in none_seen.sooner(None, 1.0)
    # a numeric bound is the user's: with no gap seen, nothing to weigh it by
    assert clock(timeout=1.0).sooner(None, 1.0) == ""


def tuned(timeout: float | str, floor: float = 120.0, gaps: tuple[float, ...] = ()) -> SilenceClock:
    """A clock under `timeout` and `floor` (silence_factor 10), that has heard `gaps`
    between two messages (of any simulation of the study)."""
    out = SilenceClock(
        timeout, floor=floor, factor=10.0, startup=STARTUP_DEFAULT, poll_interval=0.05,
        heartbeat=True,
    )  # fmt: skip
    for gap in gaps:
        out.heard(gap, first=False)
    return out


@pytest.mark.parametrize(
    ("timeout", "study_gap", "own_gap", "said"),
    [
        # a healthy simulation's 20 s steps set the "auto" bound, 200 s; the hung one's
        # 0.5 s gaps were told simulation_timeout=5, which kills the healthy one
        ("auto", 20.0, 0.5, None),
        # a numeric 120 s, the study's 20 s steps: simulation_timeout=6 was told
        (120.0, 20.0, 0.6, None),
        (120.0, 2.0, 0.6, ("simulation_timeout", 20)),
        # the floor sets the bound: silence_floor=5 was told, "after 5 s", where the
        # study's 5 s silence makes that floor's bound 50 s
        ("auto", 5.0, 0.5, ("silence_floor", 50)),
        ("auto", 0.5, None, ("silence_floor", 5)),  # (the attempt sent one message)
    ],
)
def test_the_sooner_bound_kills_no_silence_the_study_has_seen(
    timeout: float | str, study_gap: float, own_gap: float | None, said: tuple[str, int] | None
) -> None:
    """`SilenceClock.sooner` weighs the setting it names, which bounds every simulation
    of the study, by the longest silence between two messages the study has seen, not
    the killed attempt's alone, and states the bound that setting would give. The
    oracle: the setting named, applied to a clock that heard the same silences, kills
    none of them, and bounds a silence at the seconds stated; nothing is said when it
    would be no tighter."""
    gaps = (study_gap,) if own_gap is None else (study_gap, own_gap)
    clock_now = tuned(timeout, gaps=gaps)
    now = clock_now.bound(True)
    assert now is not None
    sooner = clock_now.sooner(own_gap, now[0])
    if said is None:
        assert sooner == "", sooner
        return
    setting = re.search(r"LauncherTuning\((\w+)=(\d+)\)", sooner)
    stated = re.search(r"catches a hang sooner, after (\d+) s instead of (\d+) s", sooner)
    assert setting is not None and stated is not None, sooner
    assert (setting.group(1), int(setting.group(2))) == said, sooner
    value = float(setting.group(2))
    applied = (
        tuned(timeout, floor=value, gaps=gaps)
        if setting.group(1) == "silence_floor"
        else tuned(value, gaps=gaps)
    )
    after = applied.bound(True)
    assert after is not None and after[0] == float(stated.group(1)) < now[0]
    assert float(stated.group(2)) == now[0]
    assert all(applied.judge(gap, sending=True) is None for gap in gaps)
    assert f"was {study_gap:.1f} s" in sooner  # (the study's longest, said)


@pytest.mark.parametrize(
    ("timeout", "startup", "sending", "complete", "setting"),
    [
        ("auto", STARTUP_DEFAULT, True, False, "silence_floor"),
        ("auto", STARTUP_DEFAULT, False, False, "startup_timeout"),
        ("auto", STARTUP_DEFAULT, True, True, "startup_timeout"),
        (1.0, STARTUP_DEFAULT, True, False, "simulation_timeout"),
        (1.0, STARTUP_DEFAULT, False, False, "startup_timeout"),
        (1.0, STARTUP_DEFAULT, True, True, "simulation_timeout"),
        (1.0, 2.0, False, False, "startup_timeout"),
        (1.0, 2.0, True, True, "startup_timeout"),
    ],
)
def test_a_verdict_names_the_setting_its_rule_says_lengthens_the_bound(
    timeout: float | str, startup: float, sending: bool, complete: bool, setting: str
) -> None:
    """The hung kill's line in the job's log names the setting alone (the rule is in the
    WARNING): the one the rule says to raise, or the numeric timeout that is the rule."""
    verdict = clock(timeout, startup).judge(10_000.0, sending, complete)
    assert verdict is not None
    assert verdict.setting == setting
    assert setting in verdict.rule, verdict.rule
