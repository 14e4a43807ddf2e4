"""The simulations a study gave up, as its record in the output directory says: what the
ledger checker (`lineage_check`) reads so that a given-up simulation's last steps, which
no attempt of it sent, read as expected rather than as a violation.

The record is the launcher's, in rank 0's source state of the newest checkpoint
(``OUTPUT_DIR/checkpoints/checkpoint-N/rank_0/source.json``: ``launcher.simulations``,
each id with its status and exit codes, read by `records_of`); a simulation is given up
when its status is ``failed`` (failed on every attempt: redrawn, or the study raised) or
``abandoned`` (``on_failure="abandon"``). Only the record can say so: a simulation whose
last steps are missing is otherwise a violation, whatever the reason. A record older
than the give-up (a run killed before its next checkpoint) does not name it, and the
check says MISSING as before. (A user trial, 2026-12-06: a solver that hung at its step
3 was given up after 3 attempts; the check of its study printed "MISSING: time steps
3-19 of simulation 2", then VIOLATED, and did not say why nor point to ``--steps
FILE``.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.common.words import plural
from melissa_trainer.hooks.lineage_words import spans
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.sources.source import STATE_FILE

__all__ = ["GivenUp", "read_given_up", "set_aside"]

Key = tuple[int, int]
#: where the study's record is not known, what a MISSING line adds
NO_RECORD = (
    "note: a simulation the study gave up (failed on every attempt) misses the steps no "
    "attempt of it sent, and no record of the study here says which (no checkpoint under "
    "OUTPUT_DIR/checkpoints with a launcher's record): --steps FILE naming only the "
    "finished simulations checks those alone"
)


def older_record_note(source: Path, tail: list[int]) -> str:
    """What a MISSING line adds when the record was read but does not name the
    simulations whose last steps are missing (`tail`; none: one never trained on)."""
    noun = "simulation" if len(tail) == 1 else "simulations"
    which = f"{noun} {spans(tail)}" if tail else "a simulation never trained on"
    return (
        f"note: the study's record ({source}) names no given-up simulation among those "
        f"missing their last steps ({which}): if the study gave one up after that "
        "checkpoint was written, its steps read MISSING here; --steps FILE naming only "
        "the finished simulations checks those alone"
    )


#: the statuses of a simulation the study gave up (`launcher.simulation_record`)
GIVEN_UP = frozenset({"failed", "abandoned"})


@dataclass(frozen=True)
class GivenUp:
    """The study's record of its given-up simulations: id -> the exit codes of its
    attempts, and the file it was read from."""

    simulations: dict[int, list[int | str]]
    source: Path


def read_given_up(output_dir: Path) -> GivenUp | None:
    """The given-up simulations of the study trained into `output_dir` (module
    docstring), or None when there is no record to read there: no checkpoint, or one
    whose rank 0 holds no launcher's record (a stream of solvers started by hand).

    Raises:
        ValueError: a record there that cannot be read (names the file): a check that
            went on without it would call expected steps a violation, or the reverse.
    """
    checkpoint = latest_checkpoint(output_dir / "checkpoints")  # (the trainer's own finder)
    if checkpoint is None:
        return None
    path = checkpoint / "rank_0" / STATE_FILE
    if not path.is_file():
        return None
    try:
        launcher = json.loads(path.read_text()).get("launcher")
        if launcher is None:
            return None
        given_up = {
            int(sid): list(r["exit_codes"])
            for sid, r in records_of(launcher).items()
            if r["status"] in GIVEN_UP
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(
            f"{path}: the study's record of its simulations cannot be read ({exc!r}); "
            "check with --steps FILE naming the finished simulations instead"
        ) from None
    return GivenUp(given_up, path)


def set_aside(
    missing: list[Key], seen: Iterable[Key], absent: int, output_dir: Path, lines: list[str]
) -> tuple[list[Key], int]:
    """Of the `missing` samples and the `absent` simulations never seen (`seen`: the
    samples trained on), those of the simulations
    the study gave up, as its record says (`read_given_up`), set aside, each said in a
    GIVEN UP line (appended to `lines`): a given-up simulation's steps after its last
    one trained on (all of them, if never trained on: one of the `absent`) are
    expected; a gap before that step is still missing. Returns the rest, what is still
    a violation. Without a record, a note points to ``--steps FILE``."""
    if not missing and not absent:
        return missing, absent
    try:
        record = read_given_up(output_dir)
    except ValueError as exc:
        lines.append(f"warning: {exc}")
        return missing, absent
    if record is None:
        lines.append(NO_RECORD)
        return missing, absent
    last: dict[int, int] = {}  # each simulation trained on -> its last step trained on
    for s, t in seen:
        last[s] = max(last.get(s, t), t)
    expected: dict[int, list[int]] = {s: [] for s in record.simulations}
    rest = []
    for s, t in missing:
        if s in expected and t > last.get(s, -1):
            expected[s].append(t)
        else:
            rest.append((s, t))
    unseen = [s for s in sorted(record.simulations) if s not in last]
    for sid in sorted(record.simulations):
        if not expected[sid] and sid not in unseen:
            continue
        codes = record.simulations[sid]
        what = f"time steps {spans(expected[sid])}" if expected[sid] else "steps (never trained on)"
        lines.append(
            f"GIVEN UP: simulation {sid} was given up by the study (failed "
            f"{plural(len(codes), 'attempt')}, exit codes {codes}; record: {record.source}): "
            f"its missing {what} are expected, not a violation; --steps FILE naming only "
            "the finished simulations checks those alone"
        )
    # a simulation's last steps missing, or one never trained on, that the record does
    # not name: given up after the record's checkpoint was written, perhaps
    tail = sorted({s for s, t in rest if t > last.get(s, -1)})
    if tail or absent > len(unseen):
        lines.append(older_record_note(record.source, tail))
    return rest, max(0, absent - len(unseen))
