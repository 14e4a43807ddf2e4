"""benchmarks/example_adaptation.py's `evidence`: a loss high at both ends of a
parameter's range has no evidence with the parameter (what the density sampler tests)
and much with its distance from the middle; a loss on the parameters' spread shows in
``spread``. Oracle: losses built from those quantities, the launch order shuffled
against them (the launch-order trend the sampler removes is nil)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _module():  # benchmarks/ is not a package
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import example_adaptation
    finally:
        sys.path.remove(str(BENCHMARKS))
    return example_adaptation


def observations(loss_of) -> list[dict]:
    xs = [(i + 0.5) / 31 for i in range(31)]  # symmetric about the middle, 0.5
    ys = [xs[(7 * i) % 31] for i in range(31)]  # another order
    order = [(11 * i) % 31 for i in range(31)]  # launch order, shuffled against both
    return [{"simulation_id": order[i], "parameters": {"x": xs[i], "y": ys[i]},
             "loss": loss_of(xs[i], ys[i])} for i in range(31)]  # fmt: skip


def test_a_loss_high_at_both_ends_shows_in_the_distance_from_the_middle_only() -> None:
    ev = _module().evidence(observations(lambda x, y: 1.0 + abs(x - 0.5)))
    assert ev["x"] < 1.0 and ev["|x|"] > 0.99 * math.sqrt(30)  # a rank correlation of ~1


def test_a_loss_on_the_spread_shows_in_spread() -> None:
    ev = _module().evidence(observations(lambda x, y: 1.0 + abs(x - y)))
    assert ev["spread"] > 0.99 * math.sqrt(30) and max(ev["x"], ev["y"]) < 3.0
