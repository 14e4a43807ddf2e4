"""The Navier–Stokes example as a package: `train.py` imports `navier_stokes.solver` and
`navier_stokes.models` (with examples/ on ``sys.path``), so that these modules never take
the bare names ``solver`` and ``models`` that other examples' modules have. Tests and
benchmarks import them the same way: ``from navier_stokes import models, solver, train``."""
