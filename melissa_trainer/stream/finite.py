"""The one check for NaN and Inf, shared by the client (before it sets a message's
FLAG_FINITE, `melissa_trainer.client`) and the receiver (`nonfinite`, for the
messages that come without the flag).

Imports only `math` and numpy: a simulation's client loads it without the receiver's
logging and without torch (`tests/project/test_architecture.py`,
`tests/client/test_client_imports.py`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["FLOAT_KINDS", "all_finite"]

_vdot = np.vdot  # (one global lookup per check, not a module attribute's two)

#: dtype kinds that can hold NaN or Inf: floating point and complex
FLOAT_KINDS = frozenset("fc")


def all_finite(arr: np.ndarray) -> bool:
    """True when no element of `arr` (a float or complex array) is NaN or infinite.

    Exactly ``np.isfinite(arr).all()``, in one pass over the bytes for finite data.
    Thread-safe (reads `arr` only); a non-contiguous `arr` is copied first."""
    # x . x is finite only if every x is (NaN and Inf propagate; squares cannot cancel),
    # and BLAS computes it in one pass without `isfinite`'s temporary array (figures:
    # docs/measured.md, "Design choices, measured"). An overflow of finite values
    # (|x| above 1.8e19 in float32) also gives Inf: the exact check decides then.
    flat = arr if arr.ndim == 1 else arr.reshape(-1)
    if math.isfinite(abs(_vdot(flat, flat))):
        return True
    return bool(np.isfinite(arr).all())
