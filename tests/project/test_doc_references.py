"""Every test, benchmark or example file that a page of the guide names as its evidence
exists, and so does every test function it names (``tests/x.py::test_y``).

The guide backs its promises by naming the test or the committed script that checks
them ("`tests/trainer/test_distributed.py` checks a stop asked for at step 5 ..."). A
file moved or a test renamed leaves the promise standing with nothing behind it: a
user's trial found `tests/test_benchmark_active_sampling.py` named in measured.md,
which had moved to `tests/benchmarks/`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: a repository path under one of these folders, with an optional ``::test_name``
_REF = re.compile(
    r"(?<![\w/.])((?:tests|benchmarks|examples|clients)/[\w/.\-]*?"
    r"\.(?:py|cpp|c|h|f90|sh|txt|md|toml))(?![\w])(?:::(\w+))?"
)


def pages() -> list[Path]:
    """The pages a user reads: the README, the guide, the examples' and clients' READMEs."""
    return sorted(
        [
            ROOT / "README.md",
            *(ROOT / "docs").rglob("*.md"),
            *(ROOT / "examples").rglob("*.md"),
            *(ROOT / "clients").rglob("*.md"),
        ]
    )


def dangling(text: str, root: Path) -> list[str]:
    """The references of `text` to a file missing under `root`, or to a function
    (``::name``) that the file does not define."""
    missing = []
    for found in _REF.finditer(text):
        path = root / found[1]
        if (
            not path.is_file()
            or found[2]
            and not re.search(rf"\bdef {found[2]}\b", path.read_text())
        ):
            missing.append(found[0])
    return missing


def test_the_checker_finds_a_missing_file_and_a_missing_test(tmp_path: Path) -> None:
    (tmp_path / "tests" / "a").mkdir(parents=True)
    (tmp_path / "tests" / "a" / "test_x.py").write_text("def test_here():\n    pass\n")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "hello.cpp").write_text("")
    text = (
        "checked by `tests/a/test_x.py::test_here`, `tests/a/test_x.py`,"
        " `tests/test_x.py`, `tests/a/test_x.py::test_gone`; `examples/hello.cpp`"
        " is complete (not `examples/hello.c`); see docs/tests/x.py, not ours."
    )
    assert dangling(text, tmp_path) == [
        "tests/test_x.py",
        "tests/a/test_x.py::test_gone",
        "examples/hello.c",
    ]


def test_every_test_and_script_the_guide_names_exists() -> None:
    missing = {
        page.relative_to(ROOT).as_posix(): refs
        for page in pages()
        if (refs := dangling(page.read_text(), ROOT))
    }
    assert missing == {}, "pages name tests or scripts that do not exist (moved? renamed?)"
