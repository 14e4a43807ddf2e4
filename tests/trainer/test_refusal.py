"""`refusal.elsewhere`: the copy of a start-up refusal a rank other than 0 raises (the
two-rank launch: tests/trainer/test_refused_start.py)."""

from __future__ import annotations

import pytest

from melissa_trainer import ConfigError
from melissa_trainer.trainer.lock_holder import OutputDirLocked
from melissa_trainer.trainer.refusal import SaidOnRankZero, elsewhere


@pytest.mark.timeout(10)
def test_rank_zero_raises_the_error_itself_the_others_a_quiet_copy() -> None:
    error = ConfigError(["output_dir holds checkpoints"], context="start")
    assert elsewhere(error, 0) is error
    quiet = elsewhere(error, 1)
    assert isinstance(quiet, ConfigError) and isinstance(quiet, SystemExit)
    assert type(quiet).__name__ == "ConfigError" and str(quiet) == str(error)
    assert quiet.problems == error.problems and quiet.code == 1  # type: ignore[attr-defined]
    assert elsewhere(quiet, 2) is quiet
    with pytest.raises(ConfigError):  # a user's handler catches it on every rank
        raise quiet
    locked = OutputDirLocked("/tmp/out", None)
    copy = elsewhere(locked, 3)
    assert isinstance(copy, OutputDirLocked) and isinstance(copy, SaidOnRankZero)
    assert copy.output_dir == locked.output_dir and str(copy) == str(locked)
