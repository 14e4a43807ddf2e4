"""Read a `SampleLedger`'s rank files into its runs (`Run`), in the order they started:
what the ledger checker (`lineage_check`) applies the resume rule to. A line cut by a
kill is counted on its run (`Run.torn`), not read as a record; what cannot be
attributed to a run is said in the notes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from melissa_trainer.common.words import plural
from melissa_trainer.hooks.lineage import LEDGER_DIR
from melissa_trainer.hooks.lineage_order import order_runs

__all__ = ["Key", "Record", "Run", "ledger_folder", "read_runs"]

Key = tuple[int, int]
#: (step, pseudo-epoch, padding, rank, keys) of one micro-batch
Record = tuple[int, int, bool, int, list[Key]]


@dataclass
class Run:
    """One `train()` of the ledger, all ranks together."""

    run: str
    time: float
    start_step: int
    buffer: str
    ranks: int
    records: list[Record] = field(default_factory=list)
    end_step: int | None = None  # its E line's step: None when it did not end (killed)
    torn: int = 0  # lines cut by a kill, skipped


def ledger_folder(path: str | Path) -> Path:
    """`path` if it holds rank files, else its ``lineage`` folder (an output directory)."""
    path = Path(path)
    return path if list(path.glob("rank-*.log")) else path / LEDGER_DIR


def read_runs(path: str | Path, notes: list[str] | None = None) -> list[Run]:
    """Every run of the ledger at `path` (an output directory or its ledger folder), in
    the order they started (the order of their headers in the rank files, `order_runs`:
    not their wall-clock ``time``, which can go back). What is skipped is said in
    `notes` (appended): a file whose name is not ``rank-N.log`` (a copy kept by hand),
    the lines outside a readable run (after a damaged run header, or before the first:
    not attributed to a run), and rank files that order the runs differently.

    Raises:
        FileNotFoundError: no rank file there.
    """
    folder = ledger_folder(path)
    files = []
    for file in sorted(folder.glob("rank-*.log")):
        if file.stem[len("rank-") :].isdigit():
            files.append(file)
        elif notes is not None:
            notes.append(f"{file.name}: not a rank file (rank-N.log): skipped")
    if not files:
        raise FileNotFoundError(
            f"no ledger in {folder} (no rank-N.log): train with "
            "hooks=[melissa_trainer.hooks.SampleLedger()] to write one"
        )
    runs: dict[str, Run] = {}
    sequences: list[list[str]] = []  # each file's run ids, in the order of their headers
    for file in files:
        run: Run | None = None
        sequences.append(sequence := [])
        rank, outside = int(file.stem[len("rank-") :]), 0
        for line in file.read_text(errors="replace").split("\n"):
            if not line:
                continue
            kind, _, rest = line.partition(" ")
            try:
                if kind == "R":
                    head = json.loads(rest)
                    run = runs.setdefault(
                        head["run"],
                        Run(head["run"], head["time"], head["start_step"],
                            head.get("buffer", ""), head["ranks"]),
                    )  # fmt: skip
                    run.time = min(run.time, head["time"])
                    rank = head["rank"]
                    sequence.append(run.run)
                elif kind == "E" and run is not None:
                    run.end_step = json.loads(rest)["step"]
                elif kind == "B" and run is not None:
                    step, epoch, pad, *pairs = rest.split(" ")
                    keys = [_key(p) for p in pairs]
                    run.records.append((int(step), int(epoch), pad == "1", rank, keys))
                else:
                    raise ValueError(line)
            except (ValueError, KeyError, IndexError):
                if kind == "R":  # (its records are not the run before's: none until the next)
                    run = None
                if run is not None:
                    run.torn += 1  # a line cut by a kill (or damaged): not a record
                else:
                    outside += 1
        if outside and notes is not None:
            notes.append(
                f"{file.name}: {plural(outside, 'line')} outside a readable run (a damaged run "
                "header): skipped"
            )
    return [runs[r] for r in order_runs(sequences, {r: v.time for r, v in runs.items()}, notes)]


def _key(pair: str) -> Key:
    sid, t = pair.split(":")
    return int(sid), int(t)
