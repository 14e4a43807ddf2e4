"""The ensemble launcher: parameter samplers, job backends, and the `Launcher` that runs a
study's simulations next to the trainer (see `launcher.launcher` for the policy).

Names are imported on first use (PEP 562): importing one module of the launcher (a job
imports `launcher.run_callable`) does not load the samplers, backends and policy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - the eager imports, for type checkers
    from melissa_trainer.launcher.adaptive import AdaptiveSampler, Observation
    from melissa_trainer.launcher.backends import make_backend
    from melissa_trainer.launcher.backends.base import Backend, Handle, Job, LaunchError
    from melissa_trainer.launcher.backends.local import LocalBackend
    from melissa_trainer.launcher.backends.placement import Placement
    from melissa_trainer.launcher.breed import BreedSampler
    from melissa_trainer.launcher.density import DensitySampler
    from melissa_trainer.launcher.latin_hypercube import LatinHypercubeSampler
    from melissa_trainer.launcher.launcher import Launcher
    from melissa_trainer.launcher.reports import LauncherError
    from melissa_trainer.launcher.sampler_base import Sampler, SamplerExhausted
    from melissa_trainer.launcher.samplers import (
        CallableSampler,
        HaltonSampler,
        ListSampler,
        SobolSampler,
        UniformSampler,
        make_sampler,
    )
    from melissa_trainer.launcher.surrogate import SurrogateSampler
    from melissa_trainer.launcher.tuning import LauncherTuning

__all__ = [
    "AdaptiveSampler",
    "Backend",
    "BreedSampler",
    "CallableSampler",
    "DensitySampler",
    "HaltonSampler",
    "Handle",
    "Job",
    "LatinHypercubeSampler",
    "LaunchError",
    "Launcher",
    "LauncherError",
    "LauncherTuning",
    "ListSampler",
    "LocalBackend",
    "Observation",
    "Placement",
    "Sampler",
    "SamplerExhausted",
    "SobolSampler",
    "SurrogateSampler",
    "UniformSampler",
    "make_backend",
    "make_sampler",
]

_WHERE = {
    **dict.fromkeys(["AdaptiveSampler", "Observation"], "adaptive"),
    "BreedSampler": "breed",
    "DensitySampler": "density",
    "SurrogateSampler": "surrogate",
    "make_backend": "backends",
    "Backend": "backends.base",
    "Handle": "backends.base",
    "Job": "backends.base",
    "LaunchError": "backends.base",
    "LocalBackend": "backends.local",
    "Placement": "backends.placement",
    "Launcher": "launcher",
    "LauncherError": "reports",
    "LauncherTuning": "tuning",
    **dict.fromkeys(
        [
            "CallableSampler",
            "HaltonSampler",
            "ListSampler",
            "SobolSampler",
            "UniformSampler",
            "make_sampler",
        ],
        "samplers",
    ),
    "LatinHypercubeSampler": "latin_hypercube",
    **dict.fromkeys(["Sampler", "SamplerExhausted"], "sampler_base"),
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
