"""The hooks page's hooks write their lines with `tqdm.write`, not `print`: a user trial
(2026-12-02) copied the page's `print` into a hook and its line landed on the progress
bar's. The oracle: the page's Python blocks that define a hook, and what the complete
hook's on_save writes while a bar is shown."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from tqdm import tqdm

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "hooks.md"


def hook_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    return [b for b in blocks if re.search(r"class \w+\((\w+\.)?\w*Hook\)", b)]


@pytest.mark.timeout(60)
def test_no_hook_on_the_page_prints() -> None:
    blocks = hook_blocks()
    assert blocks, f"no hook class in {PAGE}"
    for block in blocks:
        assert not re.search(r"(?<![\w.])print\(", block), block


@pytest.mark.timeout(60)
def test_the_complete_hooks_line_goes_above_the_bar(capsys: pytest.CaptureFixture[str]) -> None:
    block = next(b for b in hook_blocks() if "class SaveOnImprovement" in b)
    namespace: dict[str, object] = {}
    exec(compile(block[: block.index("\ntrainer = ")], str(PAGE), "exec"), namespace)
    hook = namespace["SaveOnImprovement"]()  # type: ignore[operator]
    trainer = SimpleNamespace(is_main_process=True)
    with tqdm(total=10, file=sys.stdout, ascii=True) as bar:
        bar.update(3)
        capsys.readouterr()
        hook.on_save(trainer, SimpleNamespace(global_step=7), None, "out/checkpoint-7")
    out = capsys.readouterr().out
    # the bar cleared its line, the hook's line on a line of its own, the bar redrawn
    assert "\rstep 7: checkpoint out/checkpoint-7\n" in out.replace("\r\x1b[A", "\r"), repr(out)
