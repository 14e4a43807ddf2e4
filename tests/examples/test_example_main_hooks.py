"""Every study example's `main` takes the user's own hooks (`main(argv, hooks=...)`), so
that a `SampleLedger` (docs/how-to/preemption.md, "Check exactly-once yourself") or any
hook is added without patching the example; the Navier–Stokes one trains with one in
test_example_navier_stokes.py."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "example", ["heat_c", "heat_pde", "lorenz", "navier_stokes", "oscillators"]
)
def test_the_example_main_takes_hooks_appended_to_its_own(example: str) -> None:
    if example in ("heat_c", "oscillators"):  # not packages: their folder on the path
        sys.path.insert(0, str(EXAMPLES / example))
        try:
            module = importlib.import_module("train")
        finally:
            sys.path.remove(str(EXAMPLES / example))
            sys.modules.pop("train", None)
    else:
        module = importlib.import_module(f"{example}.train")
    parameter = inspect.signature(module.main).parameters.get("hooks")
    assert parameter is not None, f"{example}'s main() takes no hooks"
    assert parameter.default == ()
    source = inspect.getsource(module.main)
    assert "*hooks]" in source or "list(hooks)" in source  # given to the trainer
