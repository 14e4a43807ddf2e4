"""Every flag that a page gives a benchmark or an example (`python benchmarks/fan_in.py
--ceiling`, `python examples/heat_pde/train.py --grid_size 64`) is one that script
defines.

A flag renamed or removed leaves the page's command failing at its first word
(argparse's exit 2). This reads the sources instead of running each script's `--help`
(thirty-odd interpreters importing torch): a benchmark's flags are the strings it (or a
sibling module it imports) gives `add_argument`; an example's are its own (its
command-line module's too), the shared `examples/study_args.py`'s and the fields of
`TrainingArguments`, which its `ArgumentParser` turns into flags. (A user's trial ran
every such script's `--help` on 2026-11-30: all 130 flags named in the guide were
there.)
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from melissa_trainer import TrainingArguments

ROOT = Path(__file__).resolve().parents[2]
#: a run of a script, and what follows it on the line (flags and their values)
_RUN = re.compile(r"\b((?:benchmarks|examples)/[\w/]+\.py)([^\n`|]*)")
#: a long flag, alone (not the tail of a value such as `ref-inproc`)
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
#: a name the source defines as a flag: an argparse string or a dataclass field
_DEFINED = re.compile(r"""["']--([\w-]+)["']|^\s+(\w+)\s*:\s*[\w\[\]| .,"']+=""", re.M)
_IMPORT = re.compile(r"^\s*(?:from|import)\s+([\w.]+)", re.M)


def pages() -> list[Path]:
    return sorted(
        [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.md")]
    )


def commands(text: str) -> list[tuple[str, str]]:
    """(script, long flag without its dashes) for every run of a script in `text`,
    continuation lines joined."""
    found = []
    for run in _RUN.finditer(text.replace("\\\n", " ")):
        rest = run[2].split(" #", 1)[0]  # a comment after the command
        # the next command, a quoted command given to the script (ab.py's), or a bare
        # `--` after which the flags are another program's (example_adaptation.py's)
        rest = re.split(r"[;&\"']|\)\s|\bpython\b|\s--(?=\s|$)", rest, maxsplit=1)[0]
        found += [(run[1], flag) for flag in _FLAG.findall(rest)]
    return found


def defined(script: Path) -> set[str]:
    """The flag names `script` defines (dashes as underscores), with those of the
    modules of its folder that it imports, and, for an example, TrainingArguments'."""
    sources = [script]
    for name in _IMPORT.findall(script.read_text()):
        # a bare module of its folder, or one of the folder as a package (an example's
        # ``from navier_stokes.cli import ...``, where its flags are)
        head, _, tail = name.partition(".")
        name = tail if head == script.parent.name and tail else head
        if (script.parent / f"{name}.py").is_file():
            sources.append(script.parent / f"{name}.py")
    names = {f.name for f in dataclasses.fields(TrainingArguments)} | {"config", "help"}
    if script.parts[-3] == "examples":
        sources += [ROOT / "examples" / "study_common.py", ROOT / "examples" / "study_args.py"]
    else:
        names = set()
    for source in sources:
        for flag, field in _DEFINED.findall(source.read_text()):
            names.add((flag or field).replace("-", "_"))
    return names


def unknown(script: Path, flag: str, names: set[str]) -> bool:
    name = flag.replace("-", "_")
    return name not in names and not (name.startswith("no_") and name[3:] in names)


def test_the_reader_finds_flags_and_leaves_values_alone() -> None:
    text = (
        "```bash\npython benchmarks/x.py --designs ref-inproc,refc-inproc --pairs 8 \\\n"
        "    --json   # a comment --not_a_flag\n```\n"
        "`python examples/heat_pde/train.py --grid_size 64`, then `--other` prose\n"
        "python benchmarks/y.py --json -- --num_simulations 16"
    )
    assert commands(text) == [
        ("benchmarks/x.py", "designs"),
        ("benchmarks/x.py", "pairs"),
        ("benchmarks/x.py", "json"),
        ("examples/heat_pde/train.py", "grid_size"),
        ("benchmarks/y.py", "json"),
    ]


def test_the_checker_knows_a_renamed_flag(tmp_path: Path) -> None:
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "common.py").write_text('p.add_argument("--shared-flag")\n')
    script = bench / "b.py"
    script.write_text('import common\nparser.add_argument("--rounds", type=int)\n')
    names = defined(script)
    assert not unknown(script, "rounds", names) and not unknown(script, "shared-flag", names)
    assert unknown(script, "round", names)
    assert unknown(script, "batch_size", names)  # TrainingArguments' are not a benchmark's


def test_every_flag_the_guide_gives_a_script_is_one_it_defines() -> None:
    wrong: dict[str, list[str]] = {}
    cache: dict[str, set[str]] = {}
    for page in pages():
        for name, flag in commands(page.read_text()):
            script = ROOT / name
            if not script.is_file():
                continue  # test_doc_references names it
            names = cache.setdefault(name, defined(script))
            if unknown(script, flag, names):
                wrong.setdefault(page.relative_to(ROOT).as_posix(), []).append(f"{name} --{flag}")
    assert wrong == {}, "flags the guide gives that the script does not define"
