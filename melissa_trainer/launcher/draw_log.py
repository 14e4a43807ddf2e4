"""`DrawLog`: the study's record of its draws, ``{study_dir}/draws.csv``, one CSV that
a scientist opens with pandas in one line.

One row per event, appended and flushed as it happens (a kill -9 loses none already
made), with a header; columns, in this order:

- ``simulation_id``: the simulation the row is about;
- ``event``: ``draw`` (the sampler drew its parameters; one row per simulation id),
  ``loss`` (an adaptive sampler observed its training loss: the relative loss it was
  given, the first, then again when it moved by more than `LOSS_CHANGE` (10%) of the
  last one written, no sooner than a gap of draws once it swung back and forth:
  `loss_rows`), ``redrawn`` / ``abandoned`` (it failed for
  good, its restarts used up: `LauncherTuning.on_failure` replaced it by a new draw,
  under a new id, or abandoned it; ``abandoned`` too for the one whose abandonment
  failed the study, past `LauncherTuning.min_finished_fraction`), ``failed`` (it
  failed for good and failed the study, not replaced: ``on_failure="raise"``, the
  redraws or the failure budget used up; the study's error names it), or
  ``cancelled`` (a study resumed with fewer ``n_simulations`` than its checkpoint
  forgot it, unfinished past the new end: written as the resumed launcher starts);
- each parameter by name, the values the simulation received (on every row; a
  parameter named like one of these columns is written as ``param_<name>``);
- ``drawn``: how it was drawn: ``explored`` or ``bred`` (Breed), ``explored`` or
  ``acquired`` (the surrogate acquisition), else the sampler's kind (``lhs``,
  ``sobol``, ``density``, ``list``...);
- ``parent``: the simulation a bred draw was bred from (empty otherwise);
- ``loss``: the loss observed (empty on a ``draw`` row; a given-up row repeats the
  last one written).

The sampler observes every report (the launcher hands it each simulation's newest loss
before each draw); the file skips those within `LOSS_CHANGE` of the last written, and
spaces out a swinging loss's rows (`loss_rows.LossRows`), as each draw hands the sampler
the newest loss of every simulation trained on since the last draw: unskipped, a study
of n simulations whose buffer holds k of them wrote about n * k loss rows
(`benchmarks/draws_log_size.py`: 96 simulations, 2,473 loss rows, 457 with the 10%
skip). A loss held back by the gap is written when its simulation is given up and when
the file is closed: so, at the study's end, a simulation's last ``loss`` is within 10%
of the last the sampler observed.

Every row repeats the simulation's parameters and how it was drawn, so the last row
of each simulation is all that is known of it:
``pd.read_csv(p).drop_duplicates("simulation_id", keep="last")``.

A fresh study sets an earlier run's file aside (``draws-previous-TIME.csv``). Resume:
the launcher's checkpoint holds the number of rows written when it was taken (`rows`,
its ``draw_rows``: counted under the launcher's lock, as its records were saved, so
the rows are those of the timeline it saved); the resumed launcher keeps those rows
and drops every later one (a killed run's draws, losses and given-up rows after the
checkpoint, which its resume replays or replaces; a line cut by the kill), the one
rewrite, atomic. A checkpoint saved before it counted rows: the rows of the draws it
holds (ids below its `next_id`) are kept, as then. A saved simulation without a
``draw`` row (a study saved before this file existed) gets one, ``drawn``
``unrecorded``. No row is duplicated or lost across a resume; the loss rule resumes
from the rows kept (`loss_rows`: a held loss, in no row, is not).

Not thread-safe: the launcher writes under its lock (`StudyRecord.take`,
`StudyRecordState.apply_observations`, `StudyRecord.attempt_failed`), and counts the
rows under it (`StudyRecordState.state_dict`).
"""

from __future__ import annotations

import csv
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.log_lines import warn
from melissa_trainer.launcher.loss_rows import LossRows
from melissa_trainer.launcher.sampler_base import Sampler

__all__ = ["DRAWS_FILE", "DrawLog", "draw_origin", "explored_count"]

logger = logging.getLogger("melissa_trainer.launcher")

#: the file's name in the study folder
DRAWS_FILE = "draws.csv"
_FIXED = ("simulation_id", "event", "drawn", "parent", "loss")


def explored_count(sampler: Sampler) -> int | None:
    """The exploration draws `sampler` made so far (Breed's, the surrogate's); None for
    a sampler that does not tell explored draws from others. Read before a draw, it
    tells `draw_origin` whether that draw explored."""
    explored = getattr(sampler, "explored", None)
    return explored if isinstance(explored, int) else None


def draw_origin(sampler: Sampler, explored_before: int | None) -> tuple[str, int | None]:
    """How `sampler`'s last draw was made and its parent (`DrawLog`'s ``drawn`` and
    ``parent``), from `explored_count` read before it."""
    explored = explored_count(sampler)
    if explored is None or explored_before is None:
        return sampler.kind or type(sampler).__name__, None
    if explored > explored_before:
        return "explored", None
    if sampler.kind == "breed":
        parent = getattr(sampler, "last_parent", None)
        return "bred", parent if isinstance(parent, int) else None
    return "acquired", None


class DrawLog:
    """Appends the study's draws and observed losses to `path` (see the module
    docstring for the columns and the resume rule)."""

    def __init__(self, path: Path, names: Sequence[str], file: IO[str]) -> None:
        self.path = path
        self.names = tuple(names)
        self._file = file
        self._writer = csv.writer(file)
        #: simulation id -> (parameters, drawn, parent): what every later row repeats
        self._draws: dict[int, tuple[list[float], str, str]] = {}
        #: simulation id -> the last loss written (a given-up row repeats it)
        self._losses: dict[int, str] = {}
        #: which observed losses get a row (`loss_rows`)
        self._rule = LossRows()
        #: the rows in the file below its header (a checkpoint saves it: the resume cut)
        self.rows = 0

    @staticmethod
    def columns(names: Sequence[str]) -> list[str]:
        """The header: the fixed columns around the parameters' (renamed on a clash)."""
        params = [f"param_{n}" if n in _FIXED else n for n in names]
        return [*_FIXED[:2], *params, *_FIXED[2:]]

    @classmethod
    def open(
        cls,
        path: Path,
        names: Sequence[str],
        saved: Mapping[int, Mapping[str, float]] | None = None,
        next_id: int = 0,
        rows: int | None = None,
    ) -> DrawLog:
        """A new file at `path` (an earlier run's moved to ``draws-previous-TIME.csv``
        beside it, as `job_logs` sets its logs aside: nothing is deleted) or, resuming (`saved`: the
        checkpoint's parameters per simulation id, `next_id`: its next id, `rows`: the
        rows it counted, None in a checkpoint saved before it did), the file cut to the
        checkpoint's rows (module docstring) and appended to.

        Raises:
            OSError: the file could not be written.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        header = cls.columns(names)
        kept: list[list[str]] = []
        if saved is None and path.exists():  # an earlier run's: set aside, as its logs
            path.rename(_aside(path))
        if saved is not None and path.exists():
            with path.open(newline="") as old:
                lines = list(csv.reader(old))
            if lines and lines[0] == header:  # (another header: another study's, replaced)
                # the checkpoint's rows: every later one is of a timeline the resume
                # replaces (a cut line, the kill's, can only be later: rows are appended)
                cut = lines[1:] if rows is None else lines[1 : 1 + rows]
                by_id = None if rows is not None else next_id
                kept = [r for r in cut if _kept(r, len(header), by_id)]
        if rows is not None and len(kept) < rows:  # (lost with the machine, not a kill)
            warn(
                logger,
                f"resume: {path} holds {plural(len(kept), 'whole row')} of the {rows} that the "
                "checkpoint counted; a missing draw is written again, drawn 'unrecorded'",
            )
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="") as new:
            csv.writer(new).writerows([header, *kept])
            new.flush()
            os.fsync(new.fileno())
        os.replace(tmp, path)  # atomic: a kill now leaves the old file or the new
        log = cls(path, names, path.open("a", newline=""))
        log.rows = len(kept)
        for row in kept:  # (the state the rows say: what later rows repeat, the rule's)
            n = len(names)
            if row[1] == "draw":
                values = [float(v) for v in row[2 : 2 + n]]
                log._draws[int(row[0])] = (values, row[2 + n], row[3 + n])
                log._rule.drew()
            elif row[4 + n]:
                log._losses[int(row[0])] = row[4 + n]
                if row[1] == "loss":
                    log._rule.wrote(int(row[0]), float(row[4 + n]))
        for sid, parameters in sorted((saved or {}).items()):
            if sid not in log._draws:
                log.drew(sid, parameters, "unrecorded", None)
        return log

    def drew(
        self, sid: int, parameters: Mapping[str, float], drawn: str, parent: int | None
    ) -> None:
        """Append simulation `sid`'s draw row, flushed."""
        values = [float(parameters[n]) for n in self.names]
        self._draws[sid] = (values, drawn, "" if parent is None else str(parent))
        self._write(sid, "draw", "")
        self._rule.drew()

    def observed(self, losses: Mapping[int, float]) -> None:
        """Append a loss row per simulation whose observed loss is given and gets one
        (`loss_rows.LossRows.keep`: moved by more than `LOSS_CHANGE` of the last written
        for it, past its gap); one flush."""
        for sid, loss in losses.items():
            if sid in self._draws and self._rule.keep(sid, float(loss)):
                self._loss_row(sid, float(loss))
        self._file.flush()

    def _loss_row(self, sid: int, loss: float) -> None:
        self._losses[sid] = repr(loss)
        self._write(sid, "loss", self._losses[sid], flush=False)
        self._rule.wrote(sid, loss)

    def gave_up(self, sid: int, how: str) -> None:
        """Append simulation `sid`'s row saying it was given up for good: ``redrawn``
        (a replacement is drawn under a new id), ``abandoned`` or ``failed`` (it failed
        the study, not replaced), or ``cancelled`` (a resume with fewer simulations
        forgot it), with its last loss written, if any, after its held loss's row
        (`loss_rows`: the newest the sampler observed); flushed."""
        if sid in self._draws:
            for held, loss in self._rule.held(sid):
                self._loss_row(held, loss)
            self._write(sid, how, self._losses.get(sid, ""))

    def _write(self, sid: int, event: str, loss: str, flush: bool = True) -> None:
        values, drawn, parent = self._draws[sid]
        row: list[Any] = [sid, event, *map(repr, values), drawn, parent, loss]
        self._writer.writerow(row)
        self.rows += 1
        if flush:
            self._file.flush()

    def close(self) -> None:
        """Write the held losses' rows (`loss_rows`: each simulation's last row then within
        10% of the newest loss the sampler observed), then close the file (idempotent)."""
        if self._file.closed:
            return
        for sid, loss in self._rule.held():
            self._loss_row(sid, loss)
        self._file.close()


def _kept(row: Sequence[str], width: int, next_id: int | None) -> bool:
    """A whole row (`width` fields: not one a kill cut mid-write) of a simulation id;
    with `next_id` (a checkpoint that did not count its rows), of a draw the checkpoint
    holds (an id below it)."""
    try:
        return len(row) == width and (next_id is None or int(row[0]) < next_id)
    except ValueError:
        return False


def _aside(path: Path) -> Path:
    """A free name for an earlier run's `path`: ``draws-previous-YYYYmmddTHHMMSSZ.csv``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, n = path.with_name(f"{path.stem}-previous-{stamp}{path.suffix}"), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.stem}-previous-{stamp}-{n}{path.suffix}")
    return target
