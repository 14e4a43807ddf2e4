"""The C client's sources stay under `MAX_LINES` lines, as the package's modules do
(test_module_size.py): the library's `clients/c/src/*.c` and `*.h` and the unit tests'
`clients/c/tests/*.c`. A file over it is split where a concept lives (json.c's reader and
its scanner, internal.h's declarations in one header per module), not by line count."""

from __future__ import annotations

from pathlib import Path

from test_module_size import MAX_LINES, lines_of

C_CLIENT = Path(__file__).resolve().parents[2] / "clients" / "c"
#: the files the bound covers, as globs under clients/c
PATTERNS = ("src/*.c", "src/*.h", "tests/*.c")
#: files over `MAX_LINES` (relative to clients/c) -> the most lines each may have until it
#: is split: none now (an allowance is a debt with its reason, as in test_module_size.py)
OVER: dict[str, int] = {}


def oversized_c(root: Path, limit: int, allowed: dict[str, int]) -> list[str]:
    """'path: N lines' for each file of `root` matching `PATTERNS` over `limit` and over
    its bound in `allowed` (paths relative to `root`)."""
    found = []
    for pattern in PATTERNS:
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            n = lines_of(path)
            if n > max(limit, allowed.get(rel, 0)):
                found.append(f"{rel}: {n} lines")
    return found


def test_no_c_source_is_over_its_bound() -> None:
    assert (C_CLIENT / "src" / "send.c").is_file(), C_CLIENT  # (the tree is there)
    found = oversized_c(C_CLIENT, MAX_LINES, OVER)
    assert not found, f"C sources over {MAX_LINES} lines (split by concept):\n" + "\n".join(found)


def test_the_check_finds_a_c_source_over_the_bound(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "src" / "small.c").write_text("int x;\n" * 3)
    (tmp_path / "src" / "big.h").write_text("int x;\n" * 5)
    (tmp_path / "src" / "listed.c").write_text("int x;\n" * 6)
    (tmp_path / "src" / "notes.txt").write_text("x\n" * 9)  # not a source
    (tmp_path / "tests" / "unit.c").write_text("int x;\n" * 7)
    (tmp_path / "tests" / "helper.h").write_text("int x;\n" * 9)  # (tests/*.c only)
    assert oversized_c(tmp_path, 4, {"src/listed.c": 6}) == [
        "src/big.h: 5 lines",
        "tests/unit.c: 7 lines",
    ]
