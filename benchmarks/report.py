"""The table a benchmark prints, aligned: its rows (with --json, `{"rows": [...]}`, each
row case, ours, baseline, unit, ratio, target)."""

from __future__ import annotations

from typing import Any


def print_rows(rows: list[dict[str, Any]], title: str, width: int = 46) -> None:
    """Print `title`, a header and one line per row ``{case, ours, baseline, unit,
    ratio, target}`` (`width`: the case column)."""
    print(f"\n{title}")
    head = f"{'case':<{width}} {'ours':>12} {'baseline':>12} {'unit':>8} {'ratio':>7}"
    print(f"{head} {'target':>7}")
    for r in rows:
        # (a ratio without a meaning, e.g. over a cost of 0 or less: None, printed "-")
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(
            f"{r['case']:<{width}} {r['ours']:>12,.3f} {r['baseline']:>12,.3f} {r['unit']:>8} "
            f"{ratio:>7} {r['target']!s:>7}"
        )
