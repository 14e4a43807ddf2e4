"""`Hook.eval_figures` under two ranks (gloo on CPU): called on every rank at each
validation, so a hook may reduce its rank's share there (a collective), and its metric
is then the same on both ranks, in ``state.log_history`` and as the best metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import linear_samples, xy


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_hook_metric_reduced_over_ranks_is_the_same_on_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import launch_two_ranks

    script = Path(__file__).parents[1] / "scripts" / "eval_figures_ranks.py"
    done = launch_two_ranks(script, str(tmp_path / "out"))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    ranks = [json.loads((tmp_path / "out" / f"eval_{r}.json").read_text()) for r in "01"]
    assert ranks[0] == ranks[1]  # the same metrics and best on both ranks
    evals = ranks[0]["evals"]
    assert [e["step"] for e in evals] == [3.0, 6.0]
    assert all(e["eval_counted"] == 11.0 for e in evals)  # 6 + 5 samples, summed
    targets_sq = sum(float((xy(s)[1] ** 2).sum()) for s in linear_samples(11, seed=7))
    assert evals[0]["eval_targets_sq"] == pytest.approx(targets_sq, rel=1e-9)
    assert ranks[0]["best"] == pytest.approx(targets_sq, rel=1e-9)
