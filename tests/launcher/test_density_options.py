"""`DensitySampler`'s `contrast` and `edge`: a `contrast` above `edge` (which would push
the draws where the loss is high towards the middle of the other parameters' ranges,
the opposite of what it is documented to do) is refused at construction, by the
constructor, `make_sampler` and a saved state alike; "auto" never resolves above
`edge`."""

from __future__ import annotations

import pytest

from melissa_trainer.launcher import DensitySampler, make_sampler
from melissa_trainer.launcher.density_contrast import CONTRAST, CONTRAST_FROM

pytestmark = pytest.mark.timeout(60)

SIX = {f"p{i}": (0.0, 1.0) for i in range(6)}
EIGHT = {f"p{i}": (0.0, 1.0) for i in range(CONTRAST_FROM + 1)}


def test_the_inversion_the_check_prevents() -> None:
    """The oracle of the rule, from the distribution alone: Beta(e, e)'s spread shrinks
    as e grows, so a `contrast` above `edge` gives the draws inside the high-loss region
    a narrower spread than the design's (towards the middle), one below a wider one."""
    from scipy.stats import beta

    edge = 0.7
    assert beta(0.25, 0.25).std() > beta(edge, edge).std() > beta(2.0, 2.0).std()


@pytest.mark.parametrize("contrast", [0.71, 1.0, 2.0, 10.0])
def test_a_contrast_above_edge_is_refused_with_both_fields_and_the_fix(contrast: float) -> None:
    for build in (
        lambda: DensitySampler(SIX, contrast=contrast, edge=0.7),
        lambda: make_sampler("density", SIX, contrast=contrast, edge=0.7),
    ):
        with pytest.raises(ValueError) as caught:
            build()
        message = str(caught.value)
        assert f"contrast={contrast!r}" in message and "edge=0.7" in message
        assert "contrast <= edge" in message and "contrast=None" in message


def test_a_contrast_up_to_edge_is_accepted() -> None:
    assert DensitySampler(SIX, contrast=0.3, edge=0.7).contrast == 0.3
    assert DensitySampler(SIX, contrast=0.7, edge=0.7).contrast == 0.7  # equal: no effect
    assert DensitySampler(SIX, contrast=2.0, edge=3.0).contrast == 2.0  # a wide edge


def test_auto_never_resolves_above_edge() -> None:
    assert DensitySampler(EIGHT).contrast == CONTRAST  # the default edge, 0.7
    # an edge at or below CONTRAST: the design is already as near the bounds: off
    assert DensitySampler(EIGHT, edge=0.2).contrast is None
    assert DensitySampler(EIGHT, edge=CONTRAST).contrast is None
    assert DensitySampler(EIGHT, edge=0.26).contrast == CONTRAST


def test_a_state_saved_with_a_contrast_above_edge_cannot_be_resumed_into_one() -> None:
    """The state's options are compared with the sampler's, which the constructor
    checked: an inverted run cannot be continued under the refused options."""
    state = DensitySampler(SIX, contrast=0.3).state_dict()
    state["contrast"] = 2.0  # as a run before the check could have saved it
    with pytest.raises(ValueError, match="contrast"):
        DensitySampler(SIX, contrast=0.3).load_state_dict(state)
    with pytest.raises(ValueError, match="above edge"):
        DensitySampler(SIX, contrast=2.0)
