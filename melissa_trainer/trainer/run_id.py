"""A run's identity: `new_run_id`, drawn by rank 0 when the trainer is made (`lock_share`)
and for the history's start (`history_check`); its lock file and the stream carry it.
"""

from __future__ import annotations

import secrets

__all__ = ["new_run_id"]


def new_run_id() -> str:
    """A fresh run identity: 16 hex digits (64 random bits)."""
    return f"{secrets.randbits(64):016x}"
