"""`refusal.elsewhere`: the copy of a start-up refusal a rank other than 0 raises (the
two-rank launch: tests/trainer/test_refused_start.py)."""

from __future__ import annotations

import pytest

from melissa_trainer import ConfigError
from melissa_trainer.common.refusal import SaidOnRankZero, elsewhere, launch_rank
from melissa_trainer.trainer.lock_holder import OutputDirLocked


@pytest.mark.timeout(10)
def test_rank_zero_raises_the_error_itself_the_others_a_quiet_copy() -> None:
    error = ConfigError(["output_dir holds checkpoints"], context="start")
    assert elsewhere(error, 0) is error
    quiet = elsewhere(error, 1)
    assert isinstance(quiet, ConfigError) and isinstance(quiet, SystemExit)
    assert type(quiet).__name__ == "ConfigError" and str(quiet) == str(error)
    assert quiet.problems == error.problems and quiet.code == 1  # type: ignore[attr-defined]
    assert elsewhere(quiet, 2) is quiet
    with pytest.raises(
        ConfigError, match="invalid start: output_dir holds checkpoints"
    ):  # a user's handler catches it on every rank
        raise quiet
    locked = OutputDirLocked("/tmp/out", None)
    copy = elsewhere(locked, 3)
    assert isinstance(copy, OutputDirLocked) and isinstance(copy, SaidOnRankZero)
    assert copy.output_dir == locked.output_dir and str(copy) == str(locked)


@pytest.mark.timeout(10)
def test_a_system_exit_keeps_its_code_on_every_rank() -> None:
    """argparse's status 2 (a bad flag, `config.parser`), not the refusals' 1."""
    error = SystemExit(2)
    assert elsewhere(error, 0) is error
    quiet = elsewhere(error, 1)
    assert isinstance(quiet, SaidOnRankZero) and quiet.code == 2


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("variables", "rank"),
    [
        ({}, 0),
        ({"RANK": "3"}, 3),
        ({"PMI_RANK": "2"}, 2),
        ({"OMPI_COMM_WORLD_RANK": "1", "RANK": "0"}, 0),  # torchrun's RANK first
        ({"RANK": "not-a-number"}, 0),
    ],
)
def test_launch_rank_reads_the_launchers_variables(
    variables: dict[str, str], rank: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert launch_rank() == rank
