"""The examples' own modules never clash: heat_pde, lorenz and navier_stokes each have a
``solver`` (navier_stokes a ``models`` too), and a process that imports several of them
(a test, a benchmark comparing pipelines) must get each example's own. Each example's
folder is a package and its train.py imports ``EXAMPLE.solver``, as the benchmarks and
tests do (examples/ on ``sys.path``), so no loader sets modules aside."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # its tests start interpreters

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"

#: In a fresh interpreter (no pytest path): the benchmarks that import the heat example's
#: solver by its bare name (heat_pipelines) and the Navier–Stokes one's (field_surrogate,
#: fno_feed), and the three examples' train.py, in the order given; then where each
#: module's functions come from, and a field each solver computes.
PROBE = r"""
import importlib, inspect, json, sys
sys.path[:0] = [sys.argv[1] + "/benchmarks", sys.argv[1] + "/examples"]
for name in sys.argv[2].split(","):
    importlib.import_module(name)
import field_surrogate, field_surrogate_problem, fno_feed, heat_pipelines
import heat_pde.train, lorenz.train, navier_stokes.train
from navier_stokes.flow_config import FlowConfig
ns = navier_stokes.train
parameters = {"nu": 0.02, "amplitude": 0.1, "wavenumber": 3}
fields = list(ns.solve(parameters, FlowConfig(16, 2, 0.5, 0.05), 0))
print(json.dumps({
    "heat_pde.train": inspect.getfile(heat_pde.train.solve),
    "lorenz.train": inspect.getfile(lorenz.train.trajectory),
    "navier_stokes.train": inspect.getfile(ns.solve),
    "navier_stokes.models": inspect.getfile(ns.make_model),
    "field_surrogate": inspect.getfile(field_surrogate_problem.initial_vorticity),
    "fno_feed": inspect.getfile(fno_feed.step_fields),
    "heat_pipelines": inspect.getfile(heat_pipelines.solve),
    "bare solver": getattr(sys.modules.get("solver"), "__file__", None),
    "bare models": getattr(sys.modules.get("models"), "__file__", None),
    "ns shapes": [list(f.shape) for f in fields],
    "mapping": field_surrogate_problem.example_mapping().__qualname__,
}))
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "first",
    [
        "heat_pipelines,heat_pde.train,lorenz.train",
        "field_surrogate,navier_stokes.train,lorenz.train",
    ],
)
def test_two_examples_solvers_in_one_process_are_each_their_own(first: str) -> None:
    """Whichever is imported first, each example's train.py and each benchmark uses its
    own example's solver (the file it comes from is the oracle), and the Navier–Stokes
    modules never take the bare names ``solver`` and ``models``: the heat benchmark's
    bare ``solver`` stays the heat example's."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), first],
        capture_output=True, text=True, timeout=170,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    heat, lorenz, ns = (
        str(EXAMPLES / e / "solver.py") for e in ("heat_pde", "lorenz", "navier_stokes")
    )
    assert got["heat_pde.train"] == heat and got["heat_pipelines"] == heat
    assert got["lorenz.train"] == lorenz
    assert got["navier_stokes.train"] == got["field_surrogate"] == got["fno_feed"] == ns
    assert got["navier_stokes.models"] == str(EXAMPLES / "navier_stokes" / "models.py")
    assert got["bare solver"] == heat and got["bare models"] is None
    assert got["ns shapes"] == [[16, 16], [16, 16]]
    assert got["mapping"] == "make_process_sample.<locals>.process_sample"


def test_in_the_test_process_each_example_is_a_package_of_its_own() -> None:
    """What the tests import (examples/ is on their path, pyproject's `pythonpath`)."""
    solvers = [
        importlib.import_module(f"{e}.solver") for e in ("heat_pde", "lorenz", "navier_stokes")
    ]
    assert len({id(m) for m in solvers}) == 3
    for module, example in zip(solvers, ("heat_pde", "lorenz", "navier_stokes"), strict=True):
        assert Path(module.__file__ or "") == EXAMPLES / example / "solver.py"
    train = importlib.import_module("navier_stokes.train")
    assert train.solve.__module__ == "navier_stokes.solver"
    assert train.make_model.__module__ == "navier_stokes.models"
