"""What grows with a study: the receiver's and the launcher's records of 10^3 .. 10^5
simulations — memory, checkpoint size, save and load time, and the per-tick and
per-message bookkeeping.

The records are built through their real APIs, without sockets: the receiver's
`Ingest` gets each simulation's HELLO and BYE, its steps marked as the data path marks
them (``StepLedger.mark_range``: 10^3 steps per simulation by default, the issue's
"10^5 simulations x 10^3 steps of dedup record"), the ingest's put count advancing as
with real data, so that finished simulations go to the archive as they would
(`stream/archive.py`); the launcher's `StudyRecord` draws, launches and finishes each
simulation (a uniform sampler, two parameters). Save = ``state`` / ``state_dict`` and
``json.dumps``; load = ``json.loads`` and the restore into a fresh object.

Rows (medians of interleaved rounds; ratio: higher is better):

* receiver record save / load / size at the largest size: ours (finished simulations
  archived) against the same receiver with its archive off (every ledger kept, as
  before the archive), measured in the same run: baseline / ours.
* launcher record save / load: ours (columns, state version 3) against one JSON object
  per simulation (version 2, which still loads): baseline / ours.
* buffer checkpoint: a full reservoir of 1 MB samples (256 MB; 32 MB with ``--quick``)
  saved as a checkpoint saves it (``Buffer.save``: safetensors + JSON, then fsync) and
  loaded, against writing / reading the same bytes to one file with plain ``write`` +
  ``fsync`` / ``readinto``: baseline / ours (the buffer is most of a checkpoint: the
  capacity page turns these MB/s into save times).
* growth: the cost of a launcher tick's bookkeeping (``done``, ``summary``,
  ``work_left``), of the heartbeat (``Ingest.activity``) and of one DATA message, with
  the largest study drawn, against the smallest: ours = at the largest, baseline = at
  the smallest; ratio baseline / ours, target 0.83 (flat: O(running), O(1) per message).

Then a table per size (10^3, 10^4, 10^5 simulations) of memory per simulation
(tracemalloc), checkpoint bytes, save and load seconds — the growth per 10x.

    python benchmarks/study_scale.py             # about a minute
    python benchmarks/study_scale.py --quick     # 10^2 .. 10^4 simulations, 100 steps
    python benchmarks/study_scale.py --json      # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, print_json, print_rows  # noqa: E402

from melissa_trainer.buffers import ReservoirBuffer  # noqa: E402
from melissa_trainer.checkpoint.files import fsync_tree  # noqa: E402
from melissa_trainer.launcher import make_sampler  # noqa: E402
from melissa_trainer.launcher.simulation_record import records_from  # noqa: E402
from melissa_trainer.launcher.study_record import StudyRecord  # noqa: E402
from melissa_trainer.stream.ingest import Ingest  # noqa: E402
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello  # noqa: E402

FIELD = FieldSpec("u", np.dtype("<f4"), (4,))
RECENT = 4096 + 16  # a 4096-sample buffer's recent list
GROWTH_TARGET = 0.83


def empty_ingest() -> Ingest:
    return Ingest(
        0,
        1,
        put=lambda s: True,
        end=lambda why: None,
        expected=None,
        max_field_bytes=1 << 20,
        max_pending=64,
        max_pending_bytes=1 << 26,
        max_time_step=1 << 40,
        recent_size=RECENT,
    )


def receiver(n: int, steps: int, archive: bool = True) -> Ingest:
    """A receiver's ingest after `n` finished simulations of `steps` steps, plus 4
    running ones (ids n .. n+3, half their steps)."""
    ing = empty_ingest()
    if not archive:
        ing.archive.keep = sys.maxsize  # never due: every ledger kept
    for sid in range(n + 4):
        ing.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid), "b": 1.0}))
        done = steps if sid < n else steps // 2
        ing.sims[sid].mark_range(0, done)  # as a BATCH of these steps marks them
        ing.marked += done
        ing.samples_put += done
        if sid < n:
            ing.bye(Bye(sid, 0, 1, steps))
    return ing


def fresh_launcher(n: int) -> StudyRecord:
    """A launcher's record of a study of `n` + 4 simulations, nothing drawn yet."""
    sampler = make_sampler("uniform", {"a": (0.0, 1.0), "b": (0.0, 1.0)}, seed=0)
    return StudyRecord(
        sampler, n + 4, max_restarts=1, on_failure="redraw", max_redraws=8, first_simulation_id=0
    )


def launcher(n: int) -> StudyRecord:
    """A launcher's record of `n` finished simulations and 4 running."""
    study = fresh_launcher(n)
    for i in range(n + 4):
        sid = study.take(float(i))
        if sid is not None and i < n:
            study.process_ended(sid, i + 1.0, 0)
    return study


def per_object_json(study: StudyRecord) -> dict[str, Any]:
    """The launcher state as version 2 wrote it: one JSON object per simulation."""
    state = study.state_dict()
    sims = {str(sid): r.to_json() for sid, r in study.records.items()}
    return dict(state, version=2, simulations=sims)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def save_load_receiver(ing: Ingest) -> tuple[float, float, int]:
    save, text = timed(lambda: json.dumps(ing.state_dict(), sort_keys=True))

    def load() -> None:
        again = empty_ingest()
        again.load_state_dict(json.loads(text), buffer_put=ing.marked)

    return save, timed(load)[0], len(text)


def save_load_launcher(study: StudyRecord, columns: bool) -> tuple[float, float, int]:
    state = study.state_dict if columns else lambda: per_object_json(study)
    save, text = timed(lambda: json.dumps(state(), sort_keys=True))
    n = len(study.records) - 4
    load = timed(lambda: fresh_launcher(n).load_state_dict(json.loads(text)))[0]
    if not columns:  # check that the baseline loads what it saved
        assert len(records_from(json.loads(text), ["a", "b"])) == n + 4
    return save, load, len(text)


def tick(study: StudyRecord) -> float:
    """Seconds per launcher tick's bookkeeping on the record."""
    reps = 2000
    began = time.perf_counter()
    for _ in range(reps):
        _ = study.done, study.work_left()
        study.summary(1.0)
    return (time.perf_counter() - began) / reps


def heartbeat(ing: Ingest) -> float:
    reps = 200
    began = time.perf_counter()
    for _ in range(reps):
        ing.activity()
    return (time.perf_counter() - began) / reps


def data_message(ing: Ingest, n: int, steps: int) -> float:
    """Seconds per DATA of a running simulation (its next steps, inline payloads)."""
    payload = np.zeros(4, np.float32).tobytes()
    sid, reps = n, 5000
    first = ing.sims[sid].frontier
    msgs = [
        Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 4, payload)
        for t in range(first, first + reps)
    ]
    began = time.perf_counter()
    for msg in msgs:
        ing.data(msg, True)
    return (time.perf_counter() - began) / reps


def memory_per_simulation(build: Callable[[], Any], n: int) -> float:
    """Bytes held per simulation by what `build` returns (tracemalloc)."""
    tracemalloc.start()
    kept = build()
    current = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return current / n


def growth_table(sizes: list[int], steps: int) -> list[list[str]]:
    lines = []
    for n in sizes:
        rec_mem = memory_per_simulation(lambda n=n: receiver(n, steps), n)
        ing = receiver(n, steps)
        r_save, r_load, r_bytes = save_load_receiver(ing)
        l_mem = memory_per_simulation(lambda n=n: launcher(n), n)
        study = launcher(n)
        l_save, l_load, l_bytes = save_load_launcher(study, columns=True)
        lines.append(
            [
                f"{n:,}",
                f"{rec_mem:,.0f} B",
                f"{r_bytes / 1e6:.2f} MB",
                f"{r_save * 1e3:.1f} / {r_load * 1e3:.1f} ms",
                f"{l_mem:,.0f} B",
                f"{l_bytes / 1e6:.2f} MB",
                f"{l_save * 1e3:.0f} / {l_load * 1e3:.0f} ms",
            ]
        )
    return lines


def rows_at(n: int, small: int, steps: int, rounds: int) -> list[dict[str, Any]]:
    label = f"{n:,} simulations x {steps} steps"
    ours, base = receiver(n, steps), receiver(n, steps, archive=False)
    results: dict[str, list[float]] = {k: [] for k in ("rs", "rl", "bs", "bl")}
    for _ in range(rounds):  # A B A B
        s, load, ours_bytes = save_load_receiver(ours)
        results["rs"].append(s)
        results["rl"].append(load)
        s, load, base_bytes = save_load_receiver(base)
        results["bs"].append(s)
        results["bl"].append(load)
    med = {k: statistics.median(v) for k, v in results.items()}
    rows = [
        row(f"receiver record save, {label}", med["rs"], med["bs"], "s", None),
        row(f"receiver record load, {label}", med["rl"], med["bl"], "s", None),
        row(f"receiver record size, {label}", ours_bytes / 1e6, base_bytes / 1e6, "MB", None),
    ]
    study = launcher(n)
    lr: dict[str, list[float]] = {k: [] for k in ("os", "ol", "bs", "bl")}
    for _ in range(rounds):
        s, load, col_bytes = save_load_launcher(study, columns=True)
        lr["os"].append(s)
        lr["ol"].append(load)
        s, load, obj_bytes = save_load_launcher(study, columns=False)
        lr["bs"].append(s)
        lr["bl"].append(load)
    lmed = {k: statistics.median(v) for k, v in lr.items()}
    rows += [
        row(f"launcher record save, {n:,} simulations", lmed["os"], lmed["bs"], "s", None),
        row(f"launcher record load, {n:,} simulations", lmed["ol"], lmed["bl"], "s", None),
    ]
    del base  # (its 10^5 ledgers would slow every garbage collection below)
    gc.collect()
    small_study, small_ing = launcher(small), receiver(small, steps)
    g: dict[str, list[float]] = {k: [] for k in ("t", "T", "h", "H", "d", "D")}
    for _ in range(rounds):
        g["t"].append(tick(study))
        g["T"].append(tick(small_study))
        g["h"].append(heartbeat(ours))
        g["H"].append(heartbeat(small_ing))
        g["d"].append(data_message(ours, n, steps))
        g["D"].append(data_message(small_ing, small, steps))
    gm = {k: statistics.median(v) * 1e6 for k, v in g.items()}
    vs = f"{n:,} vs {small:,} simulations"
    rows += [
        row(f"launcher tick bookkeeping, {vs}", gm["t"], gm["T"], "µs", GROWTH_TARGET),
        row(f"heartbeat (Ingest.activity), {vs}", gm["h"], gm["H"], "µs", GROWTH_TARGET),
        row(f"one DATA message, {vs}", gm["d"], gm["D"], "µs", GROWTH_TARGET),
    ]
    return rows


def buffer_rows(megabytes: int, rounds: int) -> list[dict[str, Any]]:
    """Save and load a full reservoir of 1 MB samples, against plain file I/O."""
    sample_elements = (1 << 20) // 4
    buffer = ReservoirBuffer(megabytes)
    rng = np.random.default_rng(0)
    for i in range(megabytes):
        buffer.put({"u": rng.random(sample_elements, np.float32), "i": np.array(i)})
    blob = rng.random(megabytes * sample_elements, np.float32)  # as many bytes, one array
    root = Path(tempfile.mkdtemp(prefix="mt-study-scale-"))
    times: dict[str, list[float]] = {k: [] for k in ("os", "ol", "bs", "bl")}
    try:
        for r in range(rounds):  # A B A B
            where = root / f"ours-{r}"
            times["os"].append(timed(lambda w=where: (buffer.save(w), fsync_tree(w)))[0])
            again = ReservoirBuffer(megabytes)
            times["ol"].append(timed(lambda w=where, a=again: a.load(w))[0])
            assert len(again) == megabytes
            path = root / f"plain-{r}.bin"
            times["bs"].append(timed(lambda p=path: _plain_write(p, blob))[0])
            out = np.empty_like(blob)
            times["bl"].append(timed(lambda p=path, o=out: _plain_read(p, o))[0])
            shutil.rmtree(where)
            path.unlink()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    case = f"buffer checkpoint, {megabytes} x 1 MB samples"
    return [
        row(f"{case}: save + fsync", med["os"], med["bs"], "s", None),
        row(f"{case}: load", med["ol"], med["bl"], "s", None),
    ]


def _plain_write(path: Path, blob: np.ndarray) -> None:
    with open(path, "wb") as f:
        f.write(memoryview(blob).cast("B"))
        f.flush()
        os.fsync(f.fileno())


def _plain_read(path: Path, out: np.ndarray) -> None:
    with open(path, "rb") as f:
        f.readinto(memoryview(out).cast("B"))


def row(case: str, ours: float, baseline: float, unit: str, target: float | None) -> dict:
    """Costs: ratio = baseline / ours."""
    return {
        "case": case,
        "ours": ours,
        "baseline": baseline,
        "unit": unit,
        "ratio": baseline / ours,
        "target": target,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="10^2 .. 10^4 simulations")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="steps per simulation")
    parser.add_argument("--buffer-mb", type=int, default=None, help="buffer checkpoint size")
    opts = parser.parse_args()
    sizes = [100, 1_000, 10_000] if opts.quick else [1_000, 10_000, 100_000]
    steps = opts.steps or (100 if opts.quick else 1000)
    rounds = opts.rounds or (3 if opts.quick else 5)
    rows = rows_at(sizes[-1], sizes[0], steps, rounds)
    rows += buffer_rows(opts.buffer_mb or (32 if opts.quick else 256), rounds)
    if opts.json:
        print_json(rows)
        return
    print_rows(rows, f"medians of {rounds} interleaved rounds; ratio = baseline / ours", 52)
    head = ["simulations", "receiver B/sim", "receiver ckpt", "save / load", "launcher B/sim"]
    head += ["launcher ckpt", "save / load"]
    print(f"\ngrowth with the study ({steps} steps per simulation, 4 running)")
    lines = [head, *growth_table(sizes, steps)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(f"{cell:>{w}}" for cell, w in zip(line, widths, strict=True)))


if __name__ == "__main__":
    main()
