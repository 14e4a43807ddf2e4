"""Each checker of the package's structure (`architecture_checks`, run on the package by
tests/project/test_architecture.py) run on a small package written for the purpose
that breaks its rule, so that a checker that cannot fail is caught."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from architecture_checks import (
    back_edges,
    import_cycles,
    modules,
    private_reaches,
)
from import_first import import_each_first

# -- the checkers can fail ----------------------------------------------------------------


def write_package(root: Path, files: dict[str, str]) -> Path:
    """A package `fake` under `root` with `files` (relative path -> source)."""
    package = root / "fake"
    for rel, source in {"__init__.py": "", **files}.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return package


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_checkers_find_what_they_look_for(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            # a cycle through a function-level import, and one at module level
            "a.py": "def f():\n    from fake.b import g\n    return g\n",
            "b.py": "from fake import a\n\ndef g():\n    return a\n",
            "c.py": "from fake.d import D\nC = 1\n",
            "d.py": "from .c import C\nD = 2\n",
            # not cycles: types only, and a package importing its own submodule
            "e.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from fake.f import F
            """,
            "f.py": "from fake.e import TYPE_CHECKING\nF = 1\n",
            "sub/__init__.py": "from fake.sub.x import X\n",
            "sub/x.py": "from fake.sub import _y\nX = 1\n",
            "sub/_y.py": "Y = 1\n",
            # private reaches (and what is allowed)
            "p.py": """
                from fake.sub import _y          # outside sub: a private module
                from fake.c import _hidden       # a private name
                import fake.d

                class P:
                    def __init__(self, other):
                        self._mine = 1
                        other._mine = 2              # defined here: allowed
                        print(other.__dict__)        # dunder: allowed
                        print(fake.d._secret)        # another module's
                        setattr(other, "_count", 0)  # the same, by name
            """,
            # a top-level package a promise may exclude (torch's stand-in: ~1 s lighter)
            "t.py": "import heavy\n",
        },
    )
    (tmp_path / "heavy").mkdir()
    (tmp_path / "heavy" / "__init__.py").write_text("")
    known = modules(package, "fake")
    cycles = {frozenset(c) for c in import_cycles(known)}
    assert cycles == {frozenset({"fake.a", "fake.b"}), frozenset({"fake.c", "fake.d"})}

    failures = import_each_first(sorted(known), "fake", path=tmp_path)
    assert "fake.c" in failures and "partially initialized" in failures["fake.c"]
    assert "fake.a" not in failures  # a function-level cycle imports: the graph finds it

    found = {(rel, name) for rel, name, _, _ in private_reaches(known, package)}
    assert found == {("p.py", "_y"), ("p.py", "_hidden"), ("p.py", "_secret"), ("p.py", "_count")}

    # layers: `sub` below `low`... here `c` (root) may import anything, `sub` nothing above
    edges, homeless = back_edges(known, "fake", ("sub",))
    assert homeless == [] and edges == []
    layered = write_package(
        tmp_path / "layered",
        {
            "low/__init__.py": "",
            "low/a.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:  # a type-only back-edge still counts
                    from fake.high.b import B
            """,
            "high/__init__.py": "",
            "high/b.py": "from fake.low import a\nB = 1\n",
            "other/__init__.py": "",
        },
    )
    edges, homeless = back_edges(modules(layered, "fake"), "fake", ("low", "high"))
    assert homeless == ["fake.other"]
    assert edges == ["fake.low.a:4 -> fake.high.b (low below high)"]

    blocked = import_each_first(["fake.t", "fake.e"], "fake", ("heavy",), path=tmp_path)
    assert list(blocked) == ["fake.t"] and "heavy is blocked" in blocked["fake.t"]


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_importing_first_runs_each_module_afresh_though_compiled_once(tmp_path: Path) -> None:
    """`import_each_first` compiles each source once (its interpreter's cache), but every
    import runs the modules again, the package forgotten: a module that works only
    after another was imported fails though that one came just before it."""
    write_package(
        tmp_path,
        {
            "early.py": """
                import builtins
                builtins.fake_early_runs = getattr(builtins, "fake_early_runs", 0) + 1
                E = 1
            """,
            "late.py": "import sys\nE = sys.modules['fake.early'].E\n",
            # early.py run a second time, not its module of the first import kept
            "again.py": """
                import builtins
                from fake import early
                assert builtins.fake_early_runs == 2
            """,
        },
    )
    failures = import_each_first(["fake.early", "fake.late", "fake.again"], "fake", path=tmp_path)
    assert list(failures) == ["fake.late"], failures
    assert "KeyError: 'fake.early'" in failures["fake.late"]


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_importing_first_reports_a_hang_by_cpu_time_not_by_the_wall_clock(tmp_path: Path) -> None:
    """`import_each_first` has no wall-clock bound (its callers' failed under load): a
    module that loops at import is caught by the CPU time it spends, one blocked at import
    by the CPU time the interpreter does not spend; the modules after it are not checked,
    those before it are reported as usual."""
    write_package(
        tmp_path,
        {
            "bad.py": "raise RuntimeError('bad at import')\n",
            # the lines the importing interpreter writes are not forged by a module's print
            "loud.py": 'print(\'import-first: failed ["fake.x", "a forged line"]\')\n',
            "spin.py": "while True:\n    pass\n",
            "wait.py": "import threading\nthreading.Event().wait()\n",
            "after.py": "raise RuntimeError('never imported')\n",
        },
    )
    names = ["fake.bad", "fake.loud", "fake.spin", "fake.after"]
    looped = import_each_first(names, "fake", path=tmp_path, cpu_limit=1.0)
    assert list(looped) == ["fake.bad", "fake.spin"], looped
    assert "bad at import" in looped["fake.bad"]
    assert "still importing after" in looped["fake.spin"] and "a loop?" in looped["fake.spin"]

    names = ["fake.loud", "fake.wait", "fake.after"]
    waited = import_each_first(names, "fake", path=tmp_path, stall=5.0)
    assert list(waited) == ["fake.wait"], waited
    assert "no CPU time used for" in waited["fake.wait"] and "blocked?" in waited["fake.wait"]
