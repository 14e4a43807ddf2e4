"""`unused_parameters.unused_parameters_named`, around both steps' loss computation: DDP's
error on parameters that took no part in a loss names the option that fixes it; every
other error goes through as it was. The two-rank run is
tests/trainer/test_ddp_unused_parameters.py."""

from __future__ import annotations

import pytest

from melissa_trainer.core.unused_parameters import unused_parameters_named

#: DDP's words (torch 2.13), the first line of its message
DDP = (
    "Expected to have finished reduction in the prior iteration before starting a new "
    "one. This error indicates that your module has parameters that were not used in "
    "producing loss."
)


def test_ddp_error_names_the_option() -> None:
    original = RuntimeError(DDP)
    named = pytest.raises(RuntimeError, match="--ddp_find_unused_parameters true")
    with named as raised, unused_parameters_named():
        raise original
    assert str(raised.value).startswith(DDP)
    assert raised.value.__cause__ is original


@pytest.mark.parametrize("error", [RuntimeError("CUDA out of memory"), ValueError(DDP)])
def test_any_other_error_goes_through_unchanged(error: Exception) -> None:
    with pytest.raises(type(error)) as raised, unused_parameters_named():
        raise error
    assert raised.value is error and error.__cause__ is None
    innermost = raised.tb
    while innermost.tb_next is not None:
        innermost = innermost.tb_next
    assert innermost.tb_frame.f_code.co_name == "test_any_other_error_goes_through_unchanged"


def test_nothing_raised_is_nothing() -> None:
    with unused_parameters_named():
        pass
