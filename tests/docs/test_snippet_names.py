"""Every python block of the docs names nothing it leaves undefined.

README.md's "Usage" solver called ``solver.step()`` on a ``solver`` defined nowhere,
and the stream concept page did the same: copied as written, each stops at a
NameError. This test reads every ```python block of README.md and docs/**/*.md and
checks, with the standard library's parser, that every name a block reads is
imported, assigned or a builtin, in the block or in an earlier block of its page: a
page's blocks read in order as one script, and each statement in the order it runs
(`snippet_flow`: a name read in a loop before the line that binds it, or by a function
called before it is bound, is read unbound).

Two marks, an HTML comment on the line before the block's fence, say otherwise:

- ``<!-- standalone: why -->``: the block is a script of its own, it sees none of the
  page's earlier names. A block whose first line names a file (``# my_worker.py``) is
  one too, unmarked: that file is all its reader runs.
- ``<!-- fragment: name, name; why -->``: the block is a piece of a script shown
  elsewhere and reads these names from it. They must be exactly the names it leaves
  unbound: a name the page defines after all, or one the block no longer reads, fails.
  The page's later blocks see them, as they see the names its blocks bind.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from snippet_flow import Script

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]
#: a fence, indented as a list item's may be, up to its closing fence at that indent
FENCE = re.compile(r"^( *)```python[^\n]*\n(.*?)^\1```[ \t]*$", re.S | re.M)
MARK = re.compile(r"<!--\s*(standalone|fragment):\s*(.*?)\s*-->\s*\Z", re.S)
#: a first line that names the file the block is: `# train.py`, `# my_worker.py: ...`,
#: `# mpiexec -n 4 python mpi_solver.py`
FILE_LINE = re.compile(r"#[^\n]*?(?<![\w.])[\w/-]+\.py\b")


@dataclass
class Block:
    page: str
    line: int  # of the opening fence
    source: str
    standalone: bool = False
    fragment: frozenset[str] | None = None  # the names it reads from elsewhere

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: str) -> list[Block]:
    """The ```python blocks of `page`, in order, with their marks."""
    text = (ROOT / page).read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip()
        block = Block(page, text.count("\n", 0, match.start()) + 1, textwrap.dedent(match.group(2)))
        mark = MARK.search(before[before.rfind("\n") + 1 :]) if before else None
        if mark is not None:
            kind, body = mark.groups()
            if kind == "standalone":
                assert body, f"{block}: say why the block stands alone"
                block.standalone = True
            else:
                names, _, why = body.partition(";")
                assert why.strip(), f"{block}: say where the fragment's names come from"
                block.fragment = frozenset(n.strip() for n in names.split(",") if n.strip())
        first = block.source.lstrip().split("\n", 1)[0]
        block.standalone |= bool(FILE_LINE.match(first))
        found.append(block)
    return found


def block(page: str, marker: str) -> str:
    """The first ```python block of `page` that holds `marker`."""
    for found in blocks(page):
        if marker in found.source:
            return found.source
    raise AssertionError(f"{page}: no python block holds {marker!r}")


def undefined(source: str) -> set[str]:
    """The names `source`, run alone, reads before it binds them (`snippet_flow`)."""
    script = Script()
    return script.run(source) | script.finish()


def unbound(page: str) -> list[tuple[Block, set[str]]]:
    """Each block of `page` with the names it reads before it, or (unless it stands
    alone) an earlier block of the page, binds them, in the order the page runs
    (`snippet_flow`). The names a standalone block binds, and those a fragment reads
    from elsewhere, are seen by the blocks after it. What a block's functions read
    from the page must be bound where the page calls them, and somewhere by its end."""
    script = Script()
    result: list[tuple[Block, set[str]]] = []
    defined: list[tuple[int, int]] = []  # (the block's functions in `script.later`)
    for each in blocks(page):
        if each.standalone:
            alone = Script()
            missing = alone.run(each.source) | alone.finish()
            script.seen |= alone.seen
            script.functions.update(alone.functions)
        else:
            start = len(script.later)
            missing = script.run(each.source)
        defined.append((start, len(script.later)) if not each.standalone else (0, 0))
        script.seen |= each.fragment or set()
        result.append((each, missing))
    for (_, missing), (start, end) in zip(result, defined, strict=True):
        missing |= script.finish(script.later[start:end])
    return result


def test_the_check_finds_an_undefined_name() -> None:
    assert undefined("import numpy as np\nx = np.zeros(2)\nsolver.step(x)\n") == {"solver"}
    assert undefined("def f(u):\n    return u\nf(1)\n") == set()
    assert undefined("try:\n    pass\nexcept ValueError as e:\n    print(e)\n") == set()


@pytest.mark.parametrize(
    ("source", "missing"),
    [
        # serve-while-training.md's first sketch: read in the loop before the loop binds it
        ("for t in range(3):\n    guess = u\n    u = t\n", {"u"}),
        ("print(x)\nx = 1\n", {"x"}),  # module level: statement order
        ("def f():\n    return y\nf()\ny = 1\n", {"y"}),  # called before y is bound
        ("def f():\n    return y\ny = 1\nf()\n", set()),
        ("def g():\n    return y\ndef f():\n    return g()\nf()\ny = 1\n", {"y"}),
        ("def f():\n    return y\ny = 1\n", set()),  # not called here: bound by the end
        ("def f():\n    return z\n", {"z"}),  # ... or bound nowhere
        ("f = lambda: q\nq = 1\n", set()),
        ("x = 1\ndef f():\n    print(x)\n    x = 2\n", {"x"}),  # an unbound local
        ("class A:\n    v = w\nw = 1\n", {"w"}),  # a class body runs where it stands
        ("class A:\n    def m(self):\n        return w\nw = 1\n", set()),  # a method later
        ("if len([]):\n    x = 1\nelse:\n    x = 2\nprint(x)\n", set()),
        ("try:\n    import numpy as np\nexcept ImportError:\n    np = None\nnp\n", set()),
        ("n = 0\nwhile n < 3:\n    n += 1\nm += 1\n", {"m"}),
        ("s = [i * j for i in range(3) for j in range(i)]\n", set()),
    ],
)
def test_the_check_reads_names_in_the_order_they_run(source: str, missing: set[str]) -> None:
    assert undefined(source) == missing


def test_the_check_reads_a_page_as_one_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport numpy as np\n```\n\n"
        "```python\nnp.zeros(2)\n```\n\n"  # continues the first
        "  ```python\n  x = np.ones(1)\n  ```\n\n"  # a list item's, indented
        "<!-- fragment: model; continues train.py -->\n```python\nmodel(x)\n```\n\n"
        "```python\n# my_worker.py\nnp.zeros(1)\n```\n\n"  # a file of its own
        "<!-- standalone: another script -->\n```python\nx\n```\n\n"
        "```python\nx, np, model\n```\n"  # sees the names of the blocks before, and the fragment's
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    found = unbound("page.md")
    assert [(b.line, sorted(n)) for b, n in found] == [
        (1, []), (5, []), (9, []), (14, ["model"]), (18, ["np"]), (24, ["x"]), (28, []),
    ]  # fmt: skip
    assert found[3][0].fragment == {"model"}
    assert [b.standalone for b, _ in found] == [False] * 4 + [True] * 2 + [False]


def test_a_page_runs_its_blocks_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call in a later block reads what its function needs there; a function never
    called is held to the names the page binds by its end, and named at its block."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\ndef f():\n    return model\ndef g():\n    return nowhere\n```\n\n"
        "```python\nf()\n```\n\n"  # before model is bound
        "```python\nmodel = 1\nf()\n```\n"
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert [(b.line, sorted(n)) for b, n in unbound("page.md")] == [
        (1, ["nowhere"]), (8, ["model"]), (12, []),
    ]  # fmt: skip


def test_every_block_defines_every_name_it_reads() -> None:
    wrong = []
    for page in PAGES:
        for each, missing in unbound(page):
            allowed = each.fragment or frozenset()
            if missing != allowed:
                wrong.append(
                    f"{each}: reads {sorted(missing - allowed)} undefined"
                    + (f"; its fragment mark names {sorted(allowed - missing)}, which it does not"
                       " leave unbound" if allowed - missing else "")
                )  # fmt: skip
    assert not wrong, "\n".join(wrong)


#: the self-contained solver scripts a reader copies first: no fragment among them
SOLVERS = [
    ("README.md", "# solver.py: started by the launcher"),
    ("docs/concepts/stream.md", "# simulation.py"),
    ("docs/how-to/own-solver.md", "# my_solver.py"),
]


@pytest.mark.parametrize(("page", "marker"), SOLVERS)
def test_the_solver_snippet_defines_every_name_it_reads(page: str, marker: str) -> None:
    assert undefined(block(page, marker)) == set(), page
