"""Which held-out simulation the surrogate does worst on, and its parameters: each
validation's per-simulation mean losses, kept on the trainer and written under the
output folder (a user trial of active sampling wrote its own held-out loop to learn it).

When every validation sample carries a ``simulation_id`` (`SimulationErrors`), each
`OnlineTrainer.evaluate` also:

* adds ``eval_worst_simulation`` to its metrics: the id of the held-out simulation whose
  mean loss is ``eval_loss_max`` (the smallest such id on a tie), so the log history
  says which one was worst at each validation;
* sets ``trainer.held_out_losses`` to a `HeldOutLosses`: every held-out simulation's
  id, mean loss and parameters (a sample's ``parameters``, as the stream's: a float
  array in the study's order, `stream.schema`; held-out samples built by hand must use
  it too), the same on every rank (built from the all-reduced sums: no pickle, no
  further collective);
* on the main process, rewrites ``{output_dir}/held_out_losses.csv`` (`HELD_OUT_FILE`)
  with them, atomically (a temporary file replaced: a reader or a kill sees the former
  validation's file or this one's, whole): one row per held-out simulation, worst
  first, columns ``step`` (the validation's step), ``simulation_id``, ``loss``, then
  each parameter, named as the study's sampler names them, in that order (`Study`'s
  stream has the names, and builds every sample's vector in their order whatever
  order a solver lists them in; a stream without names: no names) when their number
  matches the samples' ``parameters``, else ``parameter_0``,
  ``parameter_1``... (no parameter columns when a sample has no ``parameters``); a file
  it cannot write is a WARNING naming it, and training goes on.

The file holds the last validation only (its size is the held-out set's, whatever the
run's length); the per-validation history of the worst is the log history's
``eval_worst_simulation``. After a resume the file is the killed run's last validation
until the resumed run validates (its ``step`` column says which).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["HELD_OUT_FILE", "HeldOutLosses", "parameter_names"]

#: the file's name in the output folder
HELD_OUT_FILE = "held_out_losses.csv"


@dataclass(frozen=True)
class HeldOutLosses:
    """One validation's per-held-out-simulation mean losses.

    `ids` and `losses` are aligned (ids ascending); `parameters` is one row per id (shape
    ``(len(ids), len(names))``; no columns when the samples carry no ``parameters``);
    `names` the parameters' names; `step` the validation's global step."""

    step: int
    ids: tuple[int, ...]
    losses: tuple[float, ...]
    names: tuple[str, ...]
    parameters: np.ndarray

    @classmethod
    def of(
        cls,
        step: int,
        ids: Sequence[int],
        losses: Sequence[float],
        firsts: Sequence[Any],
        names: Sequence[str] | None,
    ) -> HeldOutLosses:
        """The losses of the simulations `ids`, each simulation's parameters read from
        its first sample (`firsts`, aligned with `ids`: `SimulationErrors.first`);
        `names` the parameters' names if known (used when their number matches)."""
        rows = [_parameters(sample) for sample in firsts]
        width = {None if r is None else len(r) for r in rows}
        if len(width) != 1 or None in width:  # missing somewhere, or of unequal lengths
            table = np.zeros((len(ids), 0))
        else:
            table = np.stack([r for r in rows if r is not None]) if rows else np.zeros((0, 0))
        n = table.shape[1]
        chosen = tuple(names) if names is not None and len(names) == n else ()
        labels = chosen or tuple(f"parameter_{k}" for k in range(n))
        return cls(int(step), tuple(int(i) for i in ids), tuple(map(float, losses)), labels, table)

    @property
    def worst(self) -> tuple[int, float, dict[str, float]]:
        """The worst simulation: its id, mean loss and parameters by name (the smallest
        id among equal losses)."""
        k = int(np.argmax(self.losses))
        return self.ids[k], self.losses[k], self.parameters_of(k)

    def parameters_of(self, k: int) -> dict[str, float]:
        """The parameters of the `k`-th simulation (in `ids`' order), by name."""
        return {n: float(v) for n, v in zip(self.names, self.parameters[k], strict=True)}

    def rows(self) -> list[dict[str, float]]:
        """One dict per simulation, worst first (ties: the smaller id first): ``step``,
        ``simulation_id``, ``loss`` and each parameter; the CSV's rows."""
        order = sorted(range(len(self.ids)), key=lambda k: (-self.losses[k], self.ids[k]))
        return [
            {"step": self.step, "simulation_id": self.ids[k], "loss": self.losses[k],
             **self.parameters_of(k)}
            for k in order
        ]  # fmt: skip

    def write(self, path: Path) -> None:
        """Replace `path` with the CSV of `rows` (header first), atomically.

        Raises:
            OSError: the folder or file could not be written.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        header = ["step", "simulation_id", "loss", *self.names]
        with tmp.open("w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(header)
            writer.writerows([[repr(r[c]) if c == "loss" or c in self.names else r[c]
                               for c in header] for r in self.rows()])  # fmt: skip
        os.replace(tmp, path)


def _parameters(sample: Any) -> np.ndarray | None:
    """A sample's ``parameters`` as a flat float64 array; None without any."""
    value = sample.get("parameters") if hasattr(sample, "get") else None
    if value is None:
        return None
    return np.asarray(value, dtype=np.float64).reshape(-1)


def parameter_names(source: Any) -> tuple[str, ...] | None:
    """The parameters' names the trainer's `source` knows: a `Study`'s (its stream's
    config, which the study fills in with its sampler's names) or a `StreamSource`'s
    own (the order the stream builds every sample's ``parameters`` in, `stream.schema`);
    None otherwise."""
    stream = getattr(source, "stream", source)
    names = getattr(getattr(stream, "config", None), "parameters", None)
    return tuple(str(n) for n in names) if names else None
