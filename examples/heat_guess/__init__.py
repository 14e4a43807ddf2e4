"""The heat_guess example as a package: `train.py` imports `heat_guess.solver` (with
examples/ on ``sys.path``), never a bare ``solver``, which other examples' modules are
named too."""
