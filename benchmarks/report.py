"""What every benchmark's command line shares: the ``--json`` and ``--quick`` flags
(`add_flags`), the type of a ``--dir`` to write in (`work_dir`), the aligned table of
its rows (`print_rows`) and, with ``--json``, its rows as one strict JSON line,
``{"rows": [...]}``, printed last (`print_json`); `finish` is the usual tail (the JSON
line alone, or the table and the notes under it). Each row: case, ours, baseline, unit,
ratio, target."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from melissa_trainer.common.json_output import to_json

__all__ = ["WORK_DIR_HELP", "add_flags", "finish", "print_json", "print_rows", "work_dir"]

#: the help of a benchmark's ``--dir`` of type `work_dir`
WORK_DIR_HELP = (
    "where to write (created, with its parents, if missing; default: the system's temp "
    "dir): a temporary directory inside it, removed at the end"
)


def work_dir(value: str) -> Path:
    """The argparse type of a ``--dir`` a benchmark writes its files in: the directory,
    created with its parents if missing, as `WORK_DIR_HELP` promises. A path that cannot
    be one (a file in the way, no permission) is an argparse error naming the flag
    (``argument --dir: ...``) and the fix, not a traceback from `tempfile`."""
    path = Path(value).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # (exist_ok: only a non-directory in the way)
        raise argparse.ArgumentTypeError(
            f"{value!r} is a file, not a directory: give a directory (created if missing)"
        ) from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(
            f"cannot create {value!r}: {exc.strerror}: give a directory you can write to"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not writable: give a directory you can write to"
        )
    return path


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
