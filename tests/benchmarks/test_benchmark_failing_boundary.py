"""benchmarks/failing_boundary.py: ours and the baseline (the zones' rule of before,
risk 1/2) on the same seeds, every row of every sampler, strict JSON last. The oracle
for one row: the baseline's failures of the e2e's sampler, counted here by replaying
its studies."""

from __future__ import annotations

import statistics

import pytest
from benchmark_json import ROW_KEYS, json_rows

from melissa_trainer.launcher import SurrogateSampler

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]  # it starts a process

BOX = {"eps": (1e-3, 1e-1, "log"), "a": (0.0, 1.0)}


def baseline_failures(seed: int) -> int:
    sampler = SurrogateSampler(BOX, seed=seed, exploration=0.0, min_observations=4)
    sampler._zones.risk = 0.5  # the rule of before
    good = failures = 0
    while good < 12 and failures < 36:
        p = sampler.draw()
        if p["eps"] < 0.003:
            failures += 1
            sampler.failed(sampler.position - 1, p)
        else:
            good += 1
            sampler.observe(sampler.position - 1, p, 1.0 / p["eps"])
    return failures


def test_the_quick_run_prints_every_row_and_the_baseline_s_failures() -> None:
    rows = {row["case"]: row for row in json_rows("failing_boundary.py", "--quick")}
    assert len(rows) == 16 and all(set(r) == ROW_KEYS for r in rows.values())
    case = "surrogate, the e2e's (exploration 0, min_observations 4): failures"
    counted = [baseline_failures(seed) for seed in range(100, 105)]
    assert rows[case]["baseline"] == statistics.median(counted)
    assert rows[case]["ours"] < rows[case]["baseline"]
