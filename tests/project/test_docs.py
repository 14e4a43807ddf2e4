"""The user guide: `mkdocs build --strict` passes, and every page of docs/ is in the nav.

The build runs in a subprocess (as CI's `tox -e docs` does); it is skipped, saying
why, where mkdocs or its plugins are not installed (`pip install -e ".[docs]"`, which
the `test` extra includes).
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: the build's modules that are not installed (mkdocstrings_handlers: mkdocstrings-python)
MISSING = [
    name
    for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers")
    if importlib.util.find_spec(name) is None
]


class _Loader(yaml.SafeLoader):
    """Reads mkdocs.yml, whose `!!python/name:` tags (none today) would stop SafeLoader."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def nav_pages(nav: Any) -> set[str]:
    """Every page file named in an mkdocs `nav` tree (links to URLs excluded)."""
    if isinstance(nav, str):
        return set() if "://" in nav else {nav}
    if isinstance(nav, list):
        return set().union(*(nav_pages(item) for item in nav))
    if isinstance(nav, dict):
        return set().union(*(nav_pages(item) for item in nav.values()))
    raise TypeError(f"unexpected nav entry {nav!r}")


def test_nav_pages_reads_nested_sections() -> None:
    nav = [{"Home": "index.md"}, {"A": [{"B": "a/b.md"}, "c.md", {"X": "https://x.org"}]}]
    assert nav_pages(nav) == {"index.md", "a/b.md", "c.md"}


def test_every_page_of_docs_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    in_nav = nav_pages(config["nav"])
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert sorted(on_disk - in_nav) == [], "pages in docs/ missing from mkdocs.yml's nav"
    assert sorted(in_nav - on_disk) == [], "nav entries of mkdocs.yml with no page in docs/"


def test_the_tox_docs_env_installs_the_docs_extra() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "melissa-trainer[mpi,examples,docs]" in extras["test"]  # CI builds the docs
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    deps = tox["testenv:docs"]["deps"].split()
    assert deps == extras["docs"]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_mkdocs_build_strict_passes(tmp_path: Path) -> None:
    if MISSING:
        pytest.skip(f"not installed: {', '.join(MISSING)} (pip install -e '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "api" / "trainer" / "index.html").is_file()


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_no_file_the_guide_needs_is_git_ignored() -> None:
    """A figure on disk but ignored by git builds here and breaks a clean clone's build."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing can be ignored")
    done = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--", "docs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    ignored = [line for line in done.stdout.splitlines() if "__pycache__" not in line]
    assert ignored == [], f"git ignores these (a clean clone lacks them): {ignored}"
