"""docs/how-to/preemption.md says which rendezvous backend a one-machine restart uses:
the default static one, with the fix for a restart that fails inside torch under
``--rdzv_backend c10d`` ("The connection to the C10d store has failed": leave the
option out), and the figures measured by hand with tests/scripts/restart_group.py,
which exists and names the command. The oracle: the page's words, read as text."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]


def page() -> str:
    return " ".join((ROOT / "docs" / "how-to" / "preemption.md").read_text().split())


def test_the_page_names_the_working_backend_and_the_fix() -> None:
    said = page()
    assert "the default (`static`, what `tests/trainer/test_restart_resumes.py` runs)" in said
    assert '"The connection to the C10d store has failed"' in said
    assert "If a restart fails so, leave out `--rdzv_backend c10d`" in said


def test_the_figures_name_a_script_that_says_its_command() -> None:
    assert "4 of 4 restarts of `tests/scripts/restart_group.py` by hand" in page()
    script = (ROOT / "tests" / "scripts" / "restart_group.py").read_text()
    assert "--max_restarts 1 --rdzv_backend c10d" in script
