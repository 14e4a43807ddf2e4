"""docs/concepts/study.md, "Your own A/B": the recipe names every place of
benchmarks/sampler_worst_case_burgers.py that holds Burgers' own problem, and each is
still there (htrial49: the page named `solve`/`run_solver` and `run_arm` only; a user
adapting it to a 2-parameter toy also had to change `BOUNDS`, `features` and its two
calls, the model's input width, and the hard-region share's `LOW_NU` and
`values["nu"]`, or the script failed or reported Burgers' region)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmarks" / "sampler_worst_case_burgers.py"


def recipe() -> str:
    text = (ROOT / "docs" / "concepts" / "study.md").read_text()
    start = text.index("`benchmarks/sampler_worst_case_burgers.py` is such an A/B")
    return " ".join(text[start : text.index("\n\n", start)].split())


@pytest.mark.timeout(30)
def test_the_recipe_names_every_problem_specific_place_and_each_exists() -> None:
    source = SCRIPT.read_text()
    tree = ast.parse(source)
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
        if isinstance(t, ast.Name)
    }  # fmt: skip
    text = recipe()
    for name in ("solve", "run_solver", "run_arm", "BOUNDS", "features", "LOW_NU"):
        assert f"`{name}`" in text or f"`{name}/" in text or f"/`{name}`" in text, name
        assert name in top, f"{name} is no longer a top-level name of {SCRIPT.name}"
    # where the page says Burgers' parameters are still spelt in `run_arm`
    assert 'drawn.append(values["nu"])' in text and 'drawn.append(values["nu"])' in source
    assert len(re.findall(r"features\(nu, A, phi", source)) == 2, "features' two calls"
    assert "torch.nn.Linear(5, 128)" in source  # the first Linear: len(features(...))
