"""What every benchmark's command line shares: the ``--json`` and ``--quick`` flags
(`add_flags`), the aligned table of its rows (`print_rows`) and, with ``--json``, its
rows as one strict JSON line, ``{"rows": [...]}``, printed last (`print_json`); `finish`
is the usual tail (the JSON line alone, or the table and the notes under it). Each row:
case, ours, baseline, unit, ratio, target."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from melissa_trainer.common.json_output import to_json

__all__ = ["add_flags", "finish", "print_json", "print_rows"]


def add_flags(
    parser: argparse.ArgumentParser,
    quick: str | None = None,
    json: str = 'print {"rows": [...]} last',
) -> None:
    """Add ``--json`` (help `json`) and, where `quick` (its help) is given, ``--quick``
    to `parser`: both store_true."""
    parser.add_argument("--json", action="store_true", help=json)
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)


def print_json(rows: list[dict[str, Any]], **extra: Any) -> None:
    """Print ``{"rows": rows, **extra}`` as one line, strict JSON (`to_json`: a NaN or
    an infinity is written null, which every parser reads)."""
    print(to_json({"rows": rows, **extra}))


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


def finish(
    rows: list[dict[str, Any]],
    title: str,
    width: int = 46,
    *,
    as_json: bool,
    notes: Iterable[str] = (),
    table_too: bool = False,
    **extra: Any,
) -> None:
    """A benchmark's last output: with `as_json`, the JSON line (`print_json`, with the
    keys `extra` beside ``rows``) alone, or, with `table_too`, after the table and the
    notes; without, the table (`print_rows`) and each of `notes` on a line of its own."""
    if not as_json or table_too:
        print_rows(rows, title, width)
        for note in notes:
            print(note)
    if as_json:
        print_json(rows, **extra)
