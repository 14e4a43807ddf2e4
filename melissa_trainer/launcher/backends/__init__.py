"""Launcher backends: how a job is started, polled and killed (see `base` for the
contract). ``local`` (processes on this machine, the default), ``mpiexec`` (MPI jobs)
and ``slurm`` (batch jobs or job steps)."""

from __future__ import annotations

import inspect
from typing import Any

from melissa_trainer.launcher.backends.base import Backend, Handle, Job, LaunchError
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.backends.mpiexec import MpiexecBackend
from melissa_trainer.launcher.backends.placement import Placement
from melissa_trainer.launcher.backends.slurm import SlurmBackend

__all__ = [
    "BACKENDS",
    "Backend",
    "Handle",
    "Job",
    "LaunchError",
    "LocalBackend",
    "MpiexecBackend",
    "Placement",
    "SlurmBackend",
    "backend_of",
    "make_backend",
]

#: backend name -> class, for `make_backend`
BACKENDS: dict[str, type[Backend]] = {
    "local": LocalBackend,
    "mpiexec": MpiexecBackend,
    "slurm": SlurmBackend,
}


def make_backend(name: str, **options: Any) -> Backend:
    """The backend called `name` ("local", "mpiexec" or "slurm"), made with `options`
    (the keyword arguments of its class).

    Raises ValueError for an unknown name or options the backend does not take (naming
    them and the accepted ones), and whatever the backend raises for a bad value.
    """
    try:
        cls = BACKENDS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown launcher backend {name!r}: choose one of {', '.join(BACKENDS)}"
        ) from None
    accepted = [p for p in inspect.signature(cls).parameters if p not in ("self",)]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"backend {name!r} does not take {', '.join(unknown)}; its options: "
            f"{', '.join(accepted) or 'none'}"
        )
    return cls(**options)


def backend_of(backend: Backend | str) -> Backend:
    """`backend` itself, or the backend it names made with its defaults (`make_backend`):
    what the `Launcher` takes as its ``backend`` argument.

    Raises:
        ValueError: neither a `Backend` nor a backend's name.
    """
    if isinstance(backend, Backend):
        return backend
    if not isinstance(backend, str):
        raise ValueError(f"backend must be a name or a Backend, not {backend!r}")
    return make_backend(backend)
