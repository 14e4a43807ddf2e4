"""docs/measured.md, "The worst-case claim on fresh seeds, quiet and busy" (and the guide's
"Which sampler" row that quotes it, docs/concepts/study.md): every median ratio, bootstrap
interval and win count of its table is recomputed from the committed runs, the
baseline's runs of the same invocation (the 2-3 parameter row's worst-case figures were
`spacing` 0's on the seeds 1000-1009, never re-judged on seeds used for nothing, nor on
a busy machine)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
RESULTS = ROOT / "benchmarks" / "results"
FILES = {
    "quiet": RESULTS / "active_sampling_surrogate_walls_5000_quiet_2026-12-06.jsonl",
    "busy": RESULTS / "active_sampling_surrogate_walls_5000_busy_2026-12-06.jsonl",
}
#: the table's columns, each a run's key
COLUMNS = ("uniform_mse", "uniform_p99", "uniform_max", "hard_mse", "hard_p90", "hard_max")
SECTION = "### The worst-case claim on fresh seeds, quiet and busy"
#: Breed's default against plain "lhs" at the benchmark's own settings, the same seeds
BREED = "active_sampling_breed_walls_5000_2026-12-06.jsonl"


def stats():  # benchmarks/ is not a package: the benchmark's own statistics
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import active_sampling_stats
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return active_sampling_stats


def table_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "measured.md").read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n### ", start + 1)]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row] for row in rows[1:]]  # (the header left out)


@pytest.mark.timeout(30)
def test_every_ratio_interval_and_win_count_of_the_table_is_the_runs() -> None:
    rows = table_rows()
    assert [row[0].split()[0] for row in rows] == ["quiet", "busy"]
    for machine, *cells in rows:
        runs = [json.loads(line) for line in FILES[machine.split()[0]].read_text().splitlines()]
        seeds = sorted({r["seed"] for r in runs})
        assert {(r["sampler"], r["seed"]) for r in runs} == {
            (arm, s) for arm in ("lhs", "surrogate") for s in seeds
        }  # both arms on every seed: each ratio is a pair of the same invocation
        for column, cell in zip(COLUMNS, cells, strict=False):
            pair = stats().paired(runs, "lhs", column, "surrogate", column)
            found = re.match(r"\**([\d.]+) \[([\d.]+), ([\d.]+)\]\** (\d+)/(\d+)", cell)
            assert found, cell
            assert float(found[1]) == pytest.approx(pair.median, abs=0.005), (machine, column)
            low, high = pair.interval()
            assert float(found[2]) == pytest.approx(low, abs=0.005), (machine, column)
            assert float(found[3]) == pytest.approx(high, abs=0.005), (machine, column)
            assert (int(found[4]), int(found[5])) == (pair.wins, len(seeds)), (machine, column)


@pytest.mark.timeout(30)
def test_the_guides_row_says_which_spacing_and_seeds_its_figures_are() -> None:
    guide = " ".join((ROOT / "docs" / "concepts" / "study.md").read_text().split())
    row = guide[guide.index("| 2-3 |") :]
    row = row[: row.index(" | ", row.index('`"surrogate"`, **only where'))]
    assert "`spacing` 0" in row and "seeds 1000-1009" in row
    fresh = table_rows()[0]
    assert f"worst {fresh[3].split()[0].strip('*')}x" in row and "seeds 5000-5009" in row


@pytest.mark.timeout(30)
def test_breeds_worst_case_figures_are_its_runs() -> None:
    runs = [json.loads(line) for line in (RESULTS / BREED).read_text().splitlines()]
    text = " ".join((ROOT / "docs" / "measured.md").read_text().split())
    quoted = text[text.index("**Breed's default, judged on its worst cases too.**") :]
    statistics = {"uniform mean": "uniform_mse", "p99": "uniform_p99",
                  "worst simulation": "uniform_max", "hard-region worst": "hard_max"}  # fmt: skip
    for name, key in statistics.items():
        pair = stats().paired(runs, "lhs", key, "breed", key)
        low, high = pair.interval()
        cell = f"{pair.median:.2f} [{low:.2f}, {high:.2f}]"
        assert f"{name} {cell} {pair.wins}/{len(pair.ratios)}" in quoted.replace("**", ""), name
    guide = " ".join((ROOT / "docs" / "concepts" / "study.md").read_text().split())
    worst = stats().paired(runs, "lhs", "uniform_max", "breed", "uniform_max").median
    assert f"its worst held-out simulation {worst:.2f}x less" in guide
