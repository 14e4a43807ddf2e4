"""`SampleLedger`: which samples each optimizer step trained on, per rank, append-only.

Opt-in: ``OnlineTrainer(..., hooks=[SampleLedger()])``. Each rank appends to
``OUTPUT_DIR/lineage/rank-R.log`` (one file per rank index, shared by the runs that
resume in that directory), one line per event, in this format (version `FORMAT`):

``R {json}``
    a run (one `train()`) starts on this rank: ``run`` (the trainer's run id and the
    number of this `train()` call, the same on every rank), ``rank``, ``ranks``,
    ``start_step`` (the step it resumes from: 0 afresh), ``buffer`` (its kind),
    ``time`` (Unix seconds, said; runs are ordered by their headers' order in the
    files, which cannot go back, not by it: `lineage_order`), ``format``.
``B STEP EPOCH PAD SIM:T SIM:T ...``
    one micro-batch of optimizer step STEP (`state.global_step` + 1), drawn in
    pseudo-epoch EPOCH, PAD 1 when it is a batch a rank whose stream ended first
    re-serves (`StreamDataset.pad`: a draw of samples trained already), then the
    ``simulation_id:time_step`` of each sample, in the batch's order.
``E {json}``
    the run ended (`train()` reached TRAIN_END): ``run``, ``step``, ``ended_by``.

Durability: each step's lines are written with one `os.write` at `on_step_end`, before
any checkpoint of that step is begun, so a checkpoint on disk implies the records of its
steps are in the kernel: a ``kill -9`` loses at most the step it interrupts (whose work
a resume redoes anyway). A node crash may lose unsynced records (no fsync: its cost).
A line cut by a kill has no newline; the next run starts on a fresh line, and the
checker (`melissa_trainer.lineage`) skips it.

The samples must carry ``simulation_id`` and ``time_step`` (a `StreamSource`'s do);
the first batch without them raises ValueError naming the fields.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from melissa_trainer.buffers import Sample
from melissa_trainer.buffers.block import BlockViews, SampleBlock
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.device_buffer import DeviceBlock
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from melissa_trainer.core.view import TrainerView

__all__ = ["FORMAT", "LEDGER_DIR", "SampleLedger", "format_keys", "ledger_file", "sample_keys"]

#: the folder of the output directory that holds the ledger
LEDGER_DIR = "lineage"
#: the format of the lines (module docstring)
FORMAT = 1


def ledger_file(directory: str | os.PathLike[str], rank: int) -> Path:
    """The ledger file of rank `rank` in a ledger folder."""
    return Path(directory) / f"rank-{rank}.log"


def sample_keys(samples: Sequence[Sample]) -> np.ndarray:
    """``[n, 2]`` int64: each sample's ``(simulation_id, time_step)``, in order; read as
    columns from a block (no per-sample work).

    Raises:
        ValueError: a sample lacks one of the fields (a source other than a stream's).
    """
    if isinstance(samples, DeviceBlock):
        samples = samples.samples()  # (its host samples: the ids stay on the host)
    columns: list[Any] = []
    for name in ("simulation_id", "time_step"):
        column: Any
        if isinstance(samples, SampleBlock):
            column = samples.fields.get(name)
        elif type(samples) is BlockViews:
            column = samples.column(name)
        else:
            column = None
        if column is None:
            try:  # (fromiter: half the time of a list of int()s)
                column = np.fromiter((s[name] for s in samples), np.int64, len(samples))
            except KeyError:
                raise ValueError(
                    f"SampleLedger records each sample's simulation_id and time_step, but a "
                    f"sample has no {name!r} field: the ledger needs a StreamSource's "
                    "samples (or samples that carry both fields); remove the hook otherwise"
                ) from None
        columns.append(np.asarray(column, dtype=np.int64).reshape(-1))
    return np.stack(columns, axis=1) if columns[0].size else np.zeros((0, 2), np.int64)


#: the format of a batch of n keys, by n: "%d:%d %d:%d ..."
_FORMATS: dict[int, str] = {}


def format_keys(keys: np.ndarray) -> str:
    """``"SIM:T SIM:T ..."`` of `sample_keys`' array: one %-format of the whole batch
    (half the time of a join of f-strings: `benchmarks/lineage_cost.py`)."""
    n = len(keys)
    fmt = _FORMATS.get(n) or _FORMATS.setdefault(n, " ".join(["%d:%d"] * n))
    return fmt % tuple(keys.ravel().tolist())


class SampleLedger(Hook):
    """Records, on every rank, the ``(simulation_id, time_step)`` of the samples of each
    micro-batch trained, with the global step, the pseudo-epoch, whether the batch was
    padding, and the run (resume) it belongs to; the file format and its durability are
    in the module docstring. Check it with ``python -m melissa_trainer.lineage check
    OUTPUT_DIR`` (`melissa_trainer.lineage.check`).

    Args:
        directory: where the rank files go; default ``OUTPUT_DIR/lineage``.

    Cost: the keys' formatting per micro-batch, one `os.write` per step
    (`benchmarks/lineage_cost.py`). Keeps no checkpoint state: the ledger is its own
    record, and a resume's header says which step it restarted from.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = None if directory is None else Path(directory)
        self._fd: int | None = None
        self._lines: list[str] = []
        self._calls = 0  # train() calls of this hook: one run each
        self._run = ""

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        folder = self.directory or Path(trainer.args.output_dir) / LEDGER_DIR
        folder.mkdir(parents=True, exist_ok=True)
        path = ledger_file(folder, trainer.process_index)
        self._close_fd()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._calls += 1
        self._run = f"{trainer.run_id or 'run'}.{self._calls}"
        header = {
            "format": FORMAT,
            "run": self._run,
            "rank": trainer.process_index,
            "ranks": trainer.num_processes,
            "start_step": state.global_step,
            "pseudo_epoch": state.pseudo_epoch,
            "buffer": str(getattr(trainer.args, "buffer", "")),
            "time": time.time(),
        }
        # A line a kill cut has no newline: start ours on a line of its own.
        torn = path.stat().st_size > 0 and not _ends_with_newline(path)
        self._write(("\n" if torn else "") + f"R {json.dumps(header)}\n")

    def on_batch_ready(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, batch: Any
    ) -> None:
        dataset = trainer.dataset
        keys = sample_keys(dataset.last_samples)
        pad = 1 if getattr(dataset, "last_padded", False) else 0
        self._lines.append(
            f"B {state.global_step + 1} {state.pseudo_epoch} {pad} {format_keys(keys)}\n"
        )

    def on_step_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self.flush()  # before this step's actions: a checkpoint of it follows the records

    def on_train_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self.flush()
        end = {"run": self._run, "step": state.global_step, "ended_by": trainer.ended_by}
        self._write(f"E {json.dumps(end)}\n")

    def flush(self) -> None:
        """Write the records held (this step's) to the file, in one `os.write`."""
        if self._lines:
            text, self._lines = "".join(self._lines), []
            self._write(text)

    def close(self) -> None:
        # An exception ends train(): the records of the steps done are kept (each was
        # written at its on_step_end). What is held is the micro-batches of the step it
        # interrupted, whose optimizer never stepped: dropped, not recorded as trained
        # (a resume redoes that step; writing them would count its samples twice).
        self._lines = []
        self._close_fd()

    def _write(self, text: str) -> None:
        if self._fd is None:
            raise RuntimeError("SampleLedger writes between on_train_start and close only")
        data = text.encode()
        while data:  # (a regular file takes it whole; a short write is finished)
            data = data[os.write(self._fd, data) :]

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
