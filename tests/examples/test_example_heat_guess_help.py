"""``python examples/heat_guess/train.py --help`` says what the example is, in full (its
description was cut at "(issue 47): a", the docstring's first line), and what it takes:
its own flags only, which docs/getting-started.md says (it claimed that every example's
``--help`` lists the `TrainingArguments` flags, which this one never took)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from process_tree import run_group

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "heat_guess" / "train.py"


@pytest.mark.e2e  # (a process of its own: the example's command line as a user runs it)
@pytest.mark.timeout(120)
def test_the_help_says_the_whole_description_and_what_it_takes() -> None:
    done = run_group(
        [sys.executable, str(EXAMPLE), "--help"],
        timeout=100,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = " ".join(done.stdout.split())  # (argparse wraps the lines)
    assert "(issue 47): a study of implicit heat solvers" in said, said[:1500]
    assert "while answering them (ServingHook)." in said, said[:1500]
    for flag in ("--num_simulations", "--method", "--no_surrogate", "--output_dir", "--json"):
        assert flag in said, flag
    # the example fixes its training arguments (`run_study`): --help says so, the docs too
    assert "--max_steps" not in said and "TrainingArguments" in said, said[-1500:]
    docs = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
    assert "heat_guess" in docs[docs.index("`--help` lists") :][:600], "the docs' exception"
