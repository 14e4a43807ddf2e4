"""How long does a rank's last heartbeat file take to write and to parse, and how big is
it, with N archived simulations (`stream.rank_activity`: the last write lists every
simulation archived on the rank, O(study); rank 0 reads it at the study's account,
within `FINAL_WAIT`)?

Ours: `activity_file.write_activity` (the archived as runs of consecutive ids, their
counts as ``v`` / ``v*k`` items) and `read_activity`, parsed once by rank 0 (a final
read kept: `OtherRanksActivity`). Baseline: one line per simulation, as written before
2026-12-07 (replayed here: the same lines, written aside then renamed), parsed by the
same `read_activity` (its per-line path, unchanged but for one ``+`` test per line),
3 times by rank 0 (`wait_final`'s read, then the account's two `add`). Simulations
0..N-1, 5 steps each on this rank ("uniform": routing ``t % W``, or every count
alike), or 5 and 4 alternating ("alternating": routing ``(s + t) % 2`` of 9 steps).
Rows: write, parse, rank 0's parses at the account (ms), the file's size (bytes);
medians of `--rounds`; ratio baseline / ours.

    python benchmarks/final_activity_file.py            # N = 10^5, 10^6; 3 rounds
    python benchmarks/final_activity_file.py --quick --json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.stream.activity_file import read_activity, write_activity  # noqa: E402

#: rank 0's parses of one final file at the account, before (`wait_final`, then the
#: account's two `add`) and now (kept after the first)
PARSES = {"baseline": 3, "ours": 1}


def samples_of(n: int, pattern: str) -> dict[int, tuple[int, int]]:
    return {s: ((5 if pattern == "uniform" else 5 - s % 2), 0) for s in range(n)}


def write_baseline(path: Path, samples: dict[int, tuple[int, int]]) -> None:
    """The last write as before: one line per archived simulation."""
    lines = ["run-a\t0\tfinal"]
    for sid in samples:
        steps, refused = samples[sid]
        lines.append(f"{sid}\t-\t{steps}\t{refused}\t-")
    fd, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    os.replace(aside, path)


def measure(n: int, pattern: str, ours: bool) -> tuple[float, float, int]:
    """(write seconds, parse seconds, bytes) of one final file."""
    samples = samples_of(n, pattern)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "activity.1"
        start = time.perf_counter()
        if ours:
            write_activity(path, "run-a", {}, False, samples, {}, final=True)
        else:
            write_baseline(path, samples)
        wrote = time.perf_counter()
        read = read_activity(path, "run-a")
        parsed = time.perf_counter()
        if read is None or read.samples != samples or not read.final:
            raise SystemExit(f"n={n} {pattern}: the file read back differs from the samples")
        return wrote - start, parsed - wrote, path.stat().st_size


def row(case: str, ours: float, baseline: float, unit: str) -> dict[str, Any]:
    return {"case": case, "ours": ours, "baseline": baseline, "unit": unit,
            "ratio": baseline / ours if ours > 0 else None, "target": None}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6])
    parser.add_argument("--rounds", type=int, default=3)
    add_flags(parser, quick="N = 1000, 1 round: checks, no figure")
    args = parser.parse_args(argv)
    sizes, rounds = ([1000], 1) if args.quick else (args.sizes, args.rounds)
    rows = []
    for n in sizes:
        for pattern in ("uniform", "alternating"):
            got: dict[str, list[tuple[float, float, int]]] = {"ours": [], "baseline": []}
            for r in range(rounds):  # (interleaved, the order alternating)
                for who in ("ours", "baseline") if r % 2 == 0 else ("baseline", "ours"):
                    got[who].append(measure(n, pattern, who == "ours"))
            med = {
                who: [statistics.median(t[i] for t in got[who]) for i in range(3)] for who in got
            }
            case = f"n={n} {pattern}"
            rows.append(row(f"{case}: write", med["ours"][0] * 1e3, med["baseline"][0] * 1e3, "ms"))
            rows.append(row(f"{case}: parse", med["ours"][1] * 1e3, med["baseline"][1] * 1e3, "ms"))
            rows.append(
                row(
                    f"{case}: rank 0's parses",
                    PARSES["ours"] * med["ours"][1] * 1e3,
                    PARSES["baseline"] * med["baseline"][1] * 1e3,
                    "ms",
                )
            )
            rows.append(row(f"{case}: size", med["ours"][2], med["baseline"][2], "bytes"))
    finish(
        rows,
        f"A rank's final heartbeat file: medians of {rounds} rounds",
        as_json=args.json,
        notes=[
            "ratio: baseline / ours (above 1: ours faster or smaller). rank 0's parses: "
            f"{PARSES['baseline']} parses of the file before, {PARSES['ours']} now.",
            "Wall time on whatever machine runs it: a busy one spreads the figures.",
        ],
        sizes=sizes,
        rounds=rounds,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
