"""Shared fixtures: a clean Accelerate state per test, one torch thread."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _fresh_accelerate_state():
    """Accelerate keeps process-wide singletons; each trainer test starts from scratch."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    torch.set_num_threads(1)
