"""A checkpoint of one rank is said to be "written by 1 training rank", not "1 training
ranks" (the resharding warning and the refusal of a part that cannot be resharded).
Before: the plural whatever the count (found resuming a 1-rank checkpoint on 2 ranks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.checkpoint import registry
from melissa_trainer.checkpoint.format import Part, Scope


@pytest.mark.parametrize(("n", "said"), [(1, "1 training rank"), (2, "2 training ranks")])
def test_a_count_of_ranks_is_said_in_the_singular_for_one(n: int, said: str) -> None:
    assert registry.training_ranks(n) == said


def test_the_refusal_of_a_one_rank_checkpoint_says_rank_in_the_singular(tmp_path: Path) -> None:
    fixed = Part("fixed", Scope.PER_RANK, lambda p, r: [], None, lambda p, v: None)
    with pytest.raises(ValueError, match=r"was written by 1 training rank but this run has 2,"):
        registry._check_reshardable(tmp_path, [fixed], 1, 2)
