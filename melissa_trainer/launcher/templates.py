"""How a simulation is told what to run: the command template and the job environment.

A command template is a string or a list of strings. A string is split into tokens with
`shlex` (no shell is ever involved), then each token is formatted with `str.format`:

* ``{simulation_id}`` (an int: ``{simulation_id:05d}`` works), ``{rendezvous_dir}``,
* ``{parameters}``: the values in `Sampler.names` order, space-separated; a token that is
  exactly ``{parameters}`` becomes one argument per value,
* ``{parameters_json}``: the JSON object ``{name: value}``,
* ``{<name>}`` for each parameter (a float: ``{x:.3f}`` works).

Splitting before formatting means a value (a directory with spaces, say) is never split.
Unknown placeholders are caught at construction by a dry run with dummy values. A
worker's command (worker mode) knows only ``{rendezvous_dir}``: it asks for its simulations.

A Python callable is run by `run_callable` in a subprocess: it is pickled once with
cloudpickle (closures and lambdas included) and the job's command runs that file.
`SimulationProgram` is either, as the launcher holds it.
"""

from __future__ import annotations

import inspect
import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from melissa_trainer.client import ENV_PARAMETERS, ENV_RENDEZVOUS, ENV_SIMULATION_ID
from melissa_trainer.client.config import ENV_ATTEMPT  # (0 the first run, 1 its first restart)
from melissa_trainer.client.launched_env import ENV_SILENCE  # (its shortest silence bound)

__all__ = [
    "Command",
    "CommandTemplate",
    "SimulationProgram",
    "callable_argv",
    "pickle_callable",
    "silence_env",
    "simulation_env",
]

_FIXED = ("simulation_id", "rendezvous_dir", "parameters", "parameters_json")

#: the argv of one simulation: ``command(simulation_id, parameters)``
Command = Callable[[int, dict[str, float]], list[str]]


class CommandTemplate:
    """A simulation command with placeholders (see the module docstring).

    Raises:
        ValueError: (at construction) an empty command, an unknown placeholder, a bad
            format spec, or a parameter named like a fixed placeholder.
    """

    def __init__(
        self, template: str | Sequence[str], names: Sequence[str], *, worker: bool = False
    ) -> None:
        if isinstance(template, str):
            tokens = shlex.split(template)
        elif isinstance(template, Sequence) and all(isinstance(t, str) for t in template):
            tokens = list(template)
        else:
            raise ValueError(f"simulation must be a str, a list of str or a callable: {template!r}")
        if not tokens:
            raise ValueError("the simulation command is empty")
        clash = sorted(set(names) & set(_FIXED))
        if clash:
            raise ValueError(
                f"parameter names {clash} clash with the command placeholders {list(_FIXED)}; "
                f"rename them"
            )
        self.tokens = tokens
        self.names = tuple(names)
        self.worker = worker
        try:  # the dry run
            if worker:
                self.format_worker("/rendezvous")
            else:
                self.format(0, dict.fromkeys(self.names, 0.5), "/rendezvous")
        except KeyError as exc:
            known = ["rendezvous_dir"] if worker else sorted((*_FIXED, *self.names))
            why = " (a worker asks for its simulations: see client.worker)" if worker else ""
            raise ValueError(
                f"unknown placeholder {{{exc.args[0]}}} in the simulation command {tokens}; "
                f"known{why}: {known}"
            ) from None
        except (IndexError, ValueError, AttributeError) as exc:
            raise ValueError(f"bad placeholder in the simulation command {tokens}: {exc}") from None

    def format(
        self, simulation_id: int, parameters: Mapping[str, float], rendezvous_dir: str
    ) -> list[str]:
        """The argv of one simulation."""
        values = [parameters[name] for name in self.names]
        fields: dict[str, Any] = {
            **parameters,
            "simulation_id": simulation_id,
            "rendezvous_dir": rendezvous_dir,
            "parameters": " ".join(repr(float(v)) for v in values),
            "parameters_json": json.dumps(dict(parameters)),
        }
        argv: list[str] = []
        for token in self.tokens:
            if token == "{parameters}":
                argv.extend(repr(float(v)) for v in values)
            else:
                argv.append(token.format(**fields))
        return argv

    def format_worker(self, rendezvous_dir: str) -> list[str]:
        """The argv of a worker (worker mode): only ``{rendezvous_dir}`` is known."""
        return [token.format(rendezvous_dir=rendezvous_dir) for token in self.tokens]


def simulation_env(
    simulation_id: int,
    parameters: Mapping[str, float],
    rendezvous_dir: str,
    attempt: int,
    silence: float | None = None,
) -> dict[str, str]:
    """The variables that tell a job which simulation it runs (the client reads them);
    `silence`: the shortest silence the launcher allows it (`silence_env`)."""
    return {
        ENV_SIMULATION_ID: str(simulation_id),
        ENV_PARAMETERS: json.dumps(dict(parameters)),
        ENV_RENDEZVOUS: rendezvous_dir,
        ENV_ATTEMPT: str(attempt),
        **silence_env(silence),
    }


def silence_env(silence: float | None) -> dict[str, str]:
    """``MELISSA_TRAINER_SILENCE_S`` for a job the launcher starts: the shortest bound on
    its silence (`SilenceClock.shortest`), in the form `launched_env.check_silence` reads
    (digits, an optional fraction of at most 3 digits here, above 0); none without a
    bound. A rerun paces its sign of life by it (`melissa_trainer.client.rerun`)."""
    if silence is None:
        return {}
    text = f"{max(silence, 0.001):.3f}".rstrip("0").rstrip(".")
    return {ENV_SILENCE: text}


def pickle_callable(fn: Callable[[int, dict[str, float]], None]) -> bytes:
    """`fn` pickled with cloudpickle, checked to accept ``(simulation_id, parameters)``.

    Lambdas, closures and functions of ``__main__`` are pickled by value; a function of an
    importable module by reference (the job must be able to import that module).

    Raises:
        ValueError: `fn` cannot be called with two positional arguments, or cannot be
            pickled (a lock, an open socket... in its closure).
    """
    import cloudpickle

    try:
        inspect.signature(fn).bind(0, {})
    except TypeError as exc:
        raise ValueError(
            f"a callable simulation is called as fn(simulation_id, parameters); {fn!r} cannot "
            f"be: {exc}"
        ) from None
    except ValueError:  # no signature available (a builtin): let the call tell
        pass
    try:
        return bytes(cloudpickle.dumps(fn))
    except Exception as exc:
        raise ValueError(f"the simulation callable {fn!r} cannot be pickled: {exc}") from exc


def callable_argv(path: str | os.PathLike[str]) -> list[str]:
    """The command that runs a pickled callable (see `run_callable`)."""
    return [sys.executable, "-m", "melissa_trainer.launcher.run_callable", str(Path(path))]


class SimulationProgram:
    """What every job of a study runs: a `CommandTemplate`, or a Python callable that is
    pickled at construction (an unpicklable one fails before anything starts) and
    written to ``{study_dir}/simulation.pkl`` by `commands`.

    Raises:
        ValueError: (at construction) see `CommandTemplate` and `pickle_callable`.
    """

    def __init__(
        self,
        simulation: str | Sequence[str] | Callable[[int, dict[str, float]], None],
        names: Sequence[str],
        *,
        worker: bool,
    ) -> None:
        self.worker = worker
        self.template: CommandTemplate | None = None
        self.pickled: bytes | None = None
        if callable(simulation):
            self.pickled = pickle_callable(simulation)
        else:
            self.template = CommandTemplate(simulation, names, worker=worker)

    def commands(self, study_dir: Path, rendezvous_dir: str) -> tuple[Command, list[str]]:
        """(the command of one simulation, the command of a worker), for a study; writes
        the pickled callable first (atomically: a job never reads half of it).

        Raises:
            OSError: the pickle could not be written.
        """
        template = self.template
        if template is None:
            base = callable_argv(self._write_pickle(study_dir))
            return (lambda sid, parameters: list(base)), base
        worker = template.format_worker(rendezvous_dir) if self.worker else []

        def command(sid: int, parameters: dict[str, float]) -> list[str]:
            return template.format(sid, parameters, rendezvous_dir)

        return command, worker

    def _write_pickle(self, study_dir: Path) -> Path:
        assert self.pickled is not None
        study_dir.mkdir(parents=True, exist_ok=True)
        path = study_dir / "simulation.pkl"
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_bytes(self.pickled)
        partial.replace(path)
        return path
