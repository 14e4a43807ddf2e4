"""User trial 31 (MEDIUM): an adaptive sampler ("surrogate" or "breed") over bounds whose
every parameter is fixed (`low == high`, documented as "fixes the parameter at that
value", docs/concepts/study.md "Samplers") is accepted when built and draws, but the
first draw after a simulation is given up (`Sampler.failed`, what the launcher calls on
a redraw) raises numpy's ``ValueError: cannot reshape array of size 0 into shape (0)``
from `AdaptiveSampler._known`: an error that names neither the bounds nor the fix.

Expected: either refused when built (a clear error: an adaptive sampler needs a varying
parameter) or the draw after a failure returns the fixed point like the draws before."""

from __future__ import annotations

import pytest

from melissa_trainer import make_sampler

pytestmark = pytest.mark.timeout(60)

FIXED = {"nu": (0.01, 0.01), "c": (0.5, 0.5)}


@pytest.mark.xfail(
    strict=True, reason="trial31: all-fixed adaptive sampler: numpy reshape error after a failure"
)
@pytest.mark.parametrize("kind", ["surrogate", "breed"])
def test_all_fixed_adaptive_sampler_after_a_failure(kind: str) -> None:
    try:
        sampler = make_sampler(kind, FIXED, seed=0)
    except ValueError as error:  # a clear refusal when built is a fix too
        assert "nu" in str(error) or "varying" in str(error), error
        return
    sampler.prepare()
    parameters = sampler.draw()
    sampler.observe(0, parameters, 1.0)
    sampler.failed(1, parameters)
    try:
        again = sampler.draw()
    except ValueError as error:
        assert "reshape" not in str(error), f"opaque error: {error}"
        return
    assert again == {"nu": 0.01, "c": 0.5}
