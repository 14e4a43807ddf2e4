"""`LauncherTuning` tells a field left at its default from the same value set, where
that changes what it does, and shows it: `startup_timeout` set bounds a start-up under a
numeric `simulation_timeout`, left at its default it does not (so the two tunings are
not equal, and their reprs differ); `silence_floor` and `silence_factor` shape only
``simulation_timeout="auto"``, so setting them with a number or None is refused."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import pytest

from melissa_trainer.launcher import LauncherTuning


def test_a_startup_timeout_left_at_its_default_is_not_equal_to_the_same_value_set() -> None:
    """``simulation_timeout=10`` alone bounds a start-up at 10 s, with
    ``startup_timeout=600`` at 600 s: they compared equal and both printed
    ``startup_timeout=600.0``."""
    unset = LauncherTuning(simulation_timeout=10)
    user = LauncherTuning(simulation_timeout=10, startup_timeout=600)
    assert (unset.startup_allowance(), user.startup_allowance()) == (10.0, 600.0)
    assert unset != user and len({unset, user}) == 2
    assert "startup_timeout=600.0 (default)" in repr(unset)
    assert (
        "startup_timeout=600.0," in repr(user)
        and "(default)" not in repr(user).split("startup_timeout=")[1].split(",")[0]
    )
    # the same settings made twice are equal, and hash alike
    again = LauncherTuning(simulation_timeout=10.0)
    assert unset == again and hash(unset) == hash(again) and len({unset, again}) == 1
    assert LauncherTuning() != LauncherTuning(startup_timeout=600)  # set: told apart too


@pytest.mark.parametrize(
    "tuning",
    [
        LauncherTuning(simulation_timeout=10),
        LauncherTuning(simulation_timeout=10, startup_timeout=600),
        LauncherTuning(silence_floor=5, silence_factor=3),
        LauncherTuning(),
    ],
    ids=["numeric-unset", "numeric-set", "auto-set", "defaults"],
)
def test_copies_keep_what_was_set(tuning: LauncherTuning) -> None:
    """Pickling (every protocol), `copy`, `dataclasses.replace` and a tuning rebuilt
    from `dataclasses.asdict` are equal to the original, and keep which fields were
    left at their default; the numbers read as numbers (str, format, JSON)."""
    copies = [pickle.loads(pickle.dumps(tuning, p)) for p in range(pickle.HIGHEST_PROTOCOL + 1)]
    copies += [copy.copy(tuning), copy.deepcopy(tuning), dataclasses.replace(tuning)]
    copies.append(LauncherTuning(**dataclasses.asdict(tuning)))
    for other in copies:
        assert other == tuning and repr(other) == repr(tuning)
        assert other.startup_allowance() == tuning.startup_allowance()
    assert dataclasses.replace(tuning, max_restarts=0) != tuning
    assert dataclasses.replace(tuning, max_restarts=0).startup_set == tuning.startup_set
    assert f"{tuning.startup_timeout}" == "600.0" and f"{tuning.startup_timeout:g}" == "600"
    assert str(tuning.silence_floor) in ("5.0", "120.0")
    record = json.loads(json.dumps(dataclasses.asdict(tuning)))
    assert record["startup_timeout"] == 600.0 and isinstance(record["silence_factor"], float)


@pytest.mark.parametrize("timeout", [10, None], ids=["numeric", "none"])
@pytest.mark.parametrize(("field", "value"), [("silence_floor", 5), ("silence_factor", 3)])
def test_a_silence_floor_or_factor_set_without_auto_is_refused(
    timeout: float | None, field: str, value: float
) -> None:
    """They shape only the derived timeout; a user trial's script set `silence_floor`
    with a numeric `simulation_timeout`, thinking it mattered. Refused when made (and by
    `replace`), naming the field and the fix."""
    said = "changes nothing" if timeout is not None else "bounds nothing"
    match = (
        rf"^LauncherTuning.{field}={float(value)} {said} with simulation_timeout="
        rf"{None if timeout is None else float(timeout)}.*set simulation_timeout='auto'"
        rf".*or leave {field} unset"
    )
    with pytest.raises(ValueError, match=match):
        LauncherTuning(simulation_timeout=timeout, **{field: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(LauncherTuning(**{field: value}), simulation_timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(LauncherTuning(simulation_timeout=timeout), **{field: value})  # type: ignore[arg-type]


def test_the_derived_timeout_and_the_defaults_are_still_accepted() -> None:
    """``"auto"`` takes both; a numeric or None timeout takes them left at their
    default, passed on as the class attributes (the examples' ``--silence_floor``
    default) or by `replace`."""
    auto = LauncherTuning(silence_floor=5, silence_factor=3)
    assert (auto.silence_floor, auto.silence_factor) == (5.0, 3.0)
    for timeout in (10, None):
        tuning = LauncherTuning(
            simulation_timeout=timeout,
            silence_floor=LauncherTuning.silence_floor,
            silence_factor=LauncherTuning.silence_factor,
        )
        assert tuning == LauncherTuning(simulation_timeout=timeout)
        assert (tuning.silence_floor, tuning.silence_factor) == (120.0, 10.0)
        back = dataclasses.replace(tuning, simulation_timeout="auto", silence_floor=5)
        assert back.silence_floor == 5.0
    with pytest.raises(ValueError, match="silence_floor must be a finite number of seconds > 0"):
        LauncherTuning(silence_floor=0)  # (the value is checked first, as before)
