"""The heat_pde example as a package: `train.py` imports `heat_pde.solver` (with examples/ on
``sys.path``), never a bare ``solver``, which other examples' modules are named too."""
