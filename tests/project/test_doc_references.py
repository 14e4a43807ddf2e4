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


def slug(heading: str) -> str:
    """The anchor MkDocs (and GitHub) give a heading: lower case, punctuation dropped,
    spaces as dashes."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", kept)


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` to a Markdown file that is missing, or to an anchor
    that no heading of that file gives."""
    broken = []
    for link in re.finditer(r"\]\(([^)#\s:]+\.md)(?:#([\w\-]+))?\)", page.read_text()):
        target = page.parent / link[1]
        if not target.is_file():
            broken.append(link[0])
        elif link[2]:
            headings = re.findall(r"^#+\s+(.*)$", target.read_text(), re.M)
            if link[2] not in {slug(h) for h in headings}:
                broken.append(link[0])
    return broken


def test_the_link_checker_finds_a_missing_page_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## The defaults, and why\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md#the-defaults-and-why) [ok](docs/a.md) [gone](docs/b.md)"
        " [no heading](docs/a.md#the-defaults) [web](https://x.org/a.md)"
    )
    assert broken_links(page) == ["](docs/b.md)", "](docs/a.md#the-defaults)"]


def test_the_readmes_links_reach_their_pages_and_headings() -> None:
    """MkDocs checks the guide's links (`mkdocs build --strict`); the READMEs, which it
    does not build, are checked here."""
    readmes = [ROOT / "README.md", *(ROOT / "examples").rglob("*.md")]
    readmes += (ROOT / "clients").rglob("*.md")
    broken = {p.relative_to(ROOT).as_posix(): b for p in readmes if (b := broken_links(p))}
    assert broken == {}
