"""JSON that people and tools read: always valid, a non-finite number as ``null``.

Python's `json.dumps` writes NaN and infinities as ``NaN`` / ``Infinity``, which are not
JSON: ``jq``, JavaScript and most parsers refuse the line (a run whose validation loss
is NaN printed ``"val_mse": NaN``). `to_json` writes them as ``null`` and passes
``allow_nan=False``, so that a value it does not convert (a NaN hidden where it does
not look) raises instead of printing invalid JSON. The examples' ``--json`` lines, the
benchmarks' ``--json`` output and `TrainerState.to_json` use it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

__all__ = ["finite", "to_json"]


def finite(obj: Any) -> Any:
    """`obj` with every NaN or infinite float (Python's or numpy's, in dicts, lists and
    tuples, at any depth) replaced by None, and numpy scalars as Python numbers."""
    if isinstance(obj, float | np.floating):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def to_json(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` of `finite(obj)` with ``allow_nan=False``: valid JSON or an error,
    never ``NaN``. `kwargs` go to `json.dumps` (``indent``, ``sort_keys``, ``default``)."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)
