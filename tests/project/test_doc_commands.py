"""The guide's command blocks run in order, as a user copies them.

A block that lists two runs of an example one after the other (`python .../train.py`,
then `accelerate launch ... .../train.py`) is run in order by a user. An example whose
runs save checkpoints in a fixed default ``--output_dir`` refuses the second run there
(`resume.md`, "Starting afresh where a run left its checkpoints": a run without
``--resume_from_checkpoint`` in a folder holding an earlier run's checkpoints stops before
anything starts): the user trial of the Navier–Stokes how-to met that refusal at its
second command. So a later run in a block needs its own ``--output_dir`` (or says
``--overwrite_output_dir`` or ``--resume_from_checkpoint``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: a run of an example's training script, and the rest of its line
_RUN = re.compile(r"(examples/(\w+)/train\.py)\b(.*)")
_BLOCK = re.compile(r"```(?:bash|sh|console)\n(.*?)```", re.S)
#: flags after which a run in the same folder is not refused (or writes nothing)
_NOT_REFUSED = ("--overwrite_output_dir", "--resume_from_checkpoint", "--help", "-h")


def pages() -> list[Path]:
    return sorted(
        [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.md")]
    )


def writes_to_a_fixed_folder(example: str) -> bool:
    """Whether `example`'s runs save checkpoints in a fixed default folder (its DEFAULTS
    name an ``outputs/`` folder; heat_guess defaults to a temporary one), in its train.py
    or the modules beside it (its command line's, where the DEFAULTS are)."""
    folder = ROOT / "examples" / example
    source = "".join(path.read_text() for path in sorted(folder.glob("*.py")))
    return '"output_dir": "outputs/' in source


def runs_refused(block: str) -> list[str]:
    """The runs of `block` (a shell block's text) that an earlier run of the same example
    in the same output folder makes refused, in order."""
    seen: set[tuple[str, str]] = set()
    refused = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0]  # a comment after the command
        found = _RUN.search(line)
        if not found or not writes_to_a_fixed_folder(found[2]):
            continue
        flags = shlex.split(found[3])
        if any(f in _NOT_REFUSED for f in flags):
            continue
        folder = "default"
        for i, flag in enumerate(flags):
            if flag == "--output_dir" and i + 1 < len(flags):
                folder = flags[i + 1]
            elif flag.startswith("--output_dir="):
                folder = flag.split("=", 1)[1]
        if (found[2], folder) in seen:
            refused.append(line.strip())
        seen.add((found[2], folder))
    return refused


def test_the_checker_finds_a_second_run_in_the_same_folder() -> None:
    block = (
        "python examples/navier_stokes/train.py   # 64²\n"
        "accelerate launch --multi_gpu --num_processes 2 examples/navier_stokes/train.py\n"
        "python examples/navier_stokes/train.py --output_dir outputs/unet --model unet\n"
        "python examples/navier_stokes/train.py --resume_from_checkpoint latest\n"
        "python examples/navier_stokes/train.py --help\n"
        "python examples/heat_guess/train.py\npython examples/heat_guess/train.py --method cg\n"
    )
    assert runs_refused(block) == [
        "accelerate launch --multi_gpu --num_processes 2 examples/navier_stokes/train.py"
    ]


def test_no_block_lists_a_run_that_an_earlier_one_makes_refused() -> None:
    found = {
        str(page.relative_to(ROOT)): refused
        for page in pages()
        for block in _BLOCK.findall(page.read_text())
        if (refused := runs_refused(block))
    }
    assert not found, (
        "these commands follow a run of the same example in the same --output_dir, which "
        f"refuses them (give each its own --output_dir): {found}"
    )
