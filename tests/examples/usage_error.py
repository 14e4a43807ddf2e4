"""The heat example's command line refused: the set-up of its usage-error tests
(tests/examples/test_example_heat.py, test_example_silence_flags.py)."""

from __future__ import annotations

import pytest

__all__ = ["heat_usage_error"]


def heat_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Parse `argv` as the heat example does (`heat_pde.train.parser`; examples/ is on
    the tests' sys.path): it must exit with status 2, a usage error. What it said on
    stderr."""
    from heat_pde.train import parser

    with pytest.raises(SystemExit) as info:
        parser(argv).parse_args_into_dataclasses(argv)
    assert info.value.code == 2
    return capsys.readouterr().err
