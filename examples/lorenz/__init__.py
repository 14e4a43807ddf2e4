"""The lorenz example as a package: `train.py` imports `lorenz.solver` (with examples/ on
``sys.path``), never a bare ``solver``, which other examples' modules are named too."""
