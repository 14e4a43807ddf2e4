"""The package's modules stay under `MAX_LINES` lines (the project's rule: one module per
concept, a module a reader holds in mind at once). A module over it is split where a
concept lives, not by line count; the few still over are listed in `OVER` with their
size, which they may not pass while they wait for their split."""

from __future__ import annotations

from pathlib import Path

import melissa_trainer

PACKAGE_DIR = Path(melissa_trainer.__file__).parent
MAX_LINES = 400
#: modules over `MAX_LINES` (relative to the package) -> the most lines each may have
#: until it is split; an entry whose module is split is only a bound, and can go
OVER: dict[str, int] = {}


def lines_of(path: Path) -> int:
    """Lines as ``wc -l`` counts them (a last line without its newline counts too)."""
    text = path.read_text()
    return text.count("\n") + (not text.endswith("\n") and bool(text))


def oversized(root: Path, limit: int, allowed: dict[str, int]) -> list[str]:
    """'module: N lines' for each module of `root` over `limit` and over its bound in
    `allowed`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        n = lines_of(path)
        if n > max(limit, allowed.get(rel, 0)):
            found.append(f"{rel}: {n} lines")
    return found


def test_no_module_is_over_its_bound() -> None:
    found = oversized(PACKAGE_DIR, MAX_LINES, OVER)
    assert not found, f"modules over {MAX_LINES} lines (split by concept):\n" + "\n".join(found)


def test_the_check_finds_a_module_over_the_bound(tmp_path: Path) -> None:
    (tmp_path / "small.py").write_text("x = 1\n" * 3)
    (tmp_path / "big.py").write_text("x = 1\n" * 5)
    (tmp_path / "listed.py").write_text("x = 1\n" * 6)
    (tmp_path / "grown.py").write_text("x = 1\n" * 7 + "y = 2")  # no final newline: 8
    assert oversized(tmp_path, 4, {"listed.py": 6, "grown.py": 7}) == [
        "big.py: 5 lines",
        "grown.py: 8 lines",
    ]
