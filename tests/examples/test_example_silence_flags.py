"""The examples' ``--silence_floor`` shapes only the derived timeout: with
``--simulation_timeout`` it is a usage error naming both flags (exit 2), not a
traceback from `LauncherTuning` once the trainer's setup has begun; left unset, it
passes `LauncherTuning`'s own default on (`melissa_trainer.launcher.silence.Default`)."""

from __future__ import annotations

import pytest
from usage_error import heat_usage_error

from melissa_trainer.launcher import LauncherTuning


@pytest.mark.timeout(120)
def test_silence_floor_with_a_numeric_timeout_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from heat_pde.train import parser  # the example's (examples/ is on sys.path)
    from study_common import StudyArgs, _tuning

    err = heat_usage_error(["--simulation_timeout", "10", "--silence_floor", "5"], capsys)
    assert "silence_floor=5.0 changes nothing with simulation_timeout=10.0" in err
    assert "drop --silence_floor, or drop --simulation_timeout" in err
    for argv in (["--simulation_timeout", "10"], ["--silence_floor", "5"]):
        (opts,) = [
            o for o in parser(argv).parse_args_into_dataclasses(argv) if isinstance(o, StudyArgs)
        ]
        assert isinstance(_tuning(opts), LauncherTuning)  # `study_source`'s, not refused
    argv = ["--startup_timeout", "30"]
    parsed = parser(argv).parse_args_into_dataclasses(argv)
    (opts,) = [o for o in parsed if isinstance(o, StudyArgs)]
    assert _tuning(opts).startup_timeout == 30.0
