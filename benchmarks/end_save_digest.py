"""What `trainer.end_save`'s digest of the state that changes without a step costs a
save, a load and the run's end, with a study's record of 10^4 .. 10^6 simulations.

The source's record is a study's on rank 0: a receiver's (`Ingest`, its simulations
finished and archived, 4 running) and the launcher's (`StudyRecord`: every simulation
drawn, launched and finished), built through their real APIs as
`benchmarks/study_scale.py` builds them; ``state_dict`` takes both each time. The buffer
is a FIFO of 64 small samples, the hooks' state one small dict. Building a launcher's
record of 10^6 simulations takes minutes: the 10^6 row's record is 10^5's with every
per-simulation column repeated 10 times, returned as it is (its ``state_dict`` costs
nothing, which favours the baseline).

Rows (medians of interleaved rounds, ours then baseline in each; ratio = baseline / ours):

* digest at a save: ours = `end_save.before_save` (the buffer's counters, the hooks'
  states) + `end_save.saved` (the source's part: the hash of the ``source.json`` the save
  wrote, which the save's manifest computes anyway: not counted); baseline = the digest
  as it was (the source's ``state_dict`` and the hooks' JSON-dumped with sorted keys,
  SHA-256), taken before every save.
* digest at a load and at the end (once per run each): ours = `end_save.fingerprint`
  (the record's `checkpoint.files.record_text`, SHA-256), baseline = the digest as it
  was: about the same work.
* source record write at a save: ours = ``source.json`` as `checkpoint.registry` writes
  it now (`record_text`: compact JSON, the C encoder), baseline = as it was
  (``write_json``: ``indent=2``, the Python encoder).

    python benchmarks/end_save_digest.py            # 10^4, 10^5, 10^6: about 2 minutes
    python benchmarks/end_save_digest.py --quick    # 10^3, 10^4
    python benchmarks/end_save_digest.py --json     # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402
from study_scale import launcher, receiver  # noqa: E402

from melissa_trainer.buffers import FIFOBuffer  # noqa: E402
from melissa_trainer.checkpoint import manifest  # noqa: E402
from melissa_trainer.checkpoint.files import record_text, write_json
from melissa_trainer.trainer import end_save  # noqa: E402

STEPS = 10  # per simulation: the receiver's record holds a bit array of them each
#: the targets: a save's digest at least 100 times cheaper; the end's and the write's
#: no dearer than before
SAVE_TARGET, SAME_TARGET = 100.0, 0.9


class Parts:
    """What `end_save` reads of a trainer: the buffer, the source, the hooks."""

    def __init__(self, state: Callable[[], dict[str, Any]]) -> None:
        self.buffer = FIFOBuffer(64)
        for i in range(64):
            self.buffer.put({"x": np.full(4, i, np.float32)})
        self.source = _Stateful(state)
        self.hooks = _Stateful(lambda: {"SimulationLossTracker": {"seen": 12}})


class _Stateful:
    def __init__(self, state: Callable[[], dict[str, Any]]) -> None:
        self.state_dict = state


@functools.cache
def study_state(n: int) -> Callable[[], dict[str, Any]]:
    """A study's record of `n` simulations on rank 0 (module docstring); above 10^5:
    10^5's widened."""
    if n > 100_000:
        state: dict[str, Any] = widened(study_state(100_000)(), n // 100_000)
        return lambda: state
    ing, study = receiver(n, STEPS), launcher(n)
    return lambda: dict(ing.state_dict(), launcher=study.state_dict())


def widened(state: Any, k: int, n: int = 100_000) -> Any:
    """`state` with every per-simulation list and string (at least `n` long) repeated `k`
    times."""
    if isinstance(state, dict):
        return {key: widened(value, k, n) for key, value in state.items()}
    if isinstance(state, (list, str)) and len(state) >= n:
        return state * k
    return state


def baseline_digest(parts: Parts) -> str:
    """`end_save.fingerprint` as it was, taken before every save."""
    stats = parts.buffer.stats()
    everything = {
        "buffer": [stats.size, stats.put, stats.got, stats.evicted],
        "source": parts.source.state_dict(),
        "hooks": parts.hooks.state_dict(),
    }
    text = json.dumps(everything, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def rows_at(n: int, rounds: int, where: Path) -> list[dict[str, Any]]:
    parts = Parts(study_state(n))
    file = where / "source.json"
    file.write_bytes(record_text(parts.source.state_dict()).encode())
    size, sha = manifest.hash_file(file)  # (the save's manifest hashes it: not timed)
    entries = {"rank_0/source.json": {"size": size, manifest.HASH: sha}}
    assert end_save.saved(end_save.before_save(parts), entries, 0) == end_save.fingerprint(parts)

    def save_ours() -> None:
        end_save.saved(end_save.before_save(parts), entries, 0)

    def write_ours() -> None:
        file.write_bytes(record_text(parts.source.state_dict()).encode())

    def write_baseline() -> None:
        write_json(file, parts.source.state_dict())

    pairs = {
        "digest at a save": (save_ours, lambda: baseline_digest(parts), SAVE_TARGET),
        "digest at a load, at the end": (
            lambda: end_save.fingerprint(parts),
            lambda: baseline_digest(parts),
            SAME_TARGET,
        ),
        "source record write at a save": (write_ours, write_baseline, SAME_TARGET),
    }
    rows = []
    for case, (ours, baseline, target) in pairs.items():
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(rounds):  # A B A B
            for fn, into in ((ours, times[0]), (baseline, times[1])):
                began = time.perf_counter()
                fn()
                into.append(time.perf_counter() - began)
        mine, theirs = statistics.median(times[0]), statistics.median(times[1])
        rows.append(
            {
                "case": f"{case}, {n:,} simulations",
                "ours": mine,
                "baseline": theirs,
                "unit": "s",
                "ratio": theirs / mine,
                "target": target,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="10^3 and 10^4 simulations")
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args()
    sizes = [1_000, 10_000] if opts.quick else [10_000, 100_000, 1_000_000]
    rounds = opts.rounds or 5
    rows = []
    with tempfile.TemporaryDirectory(prefix="mt-end-save-digest-") as tmp:
        for n in sizes:
            rows += rows_at(n, rounds if n <= 100_000 else 3, Path(tmp))
    title = f"medians of {rounds} interleaved rounds (3 at 10^6); ratio = baseline / ours"
    finish(rows, title, 52, as_json=opts.json)


if __name__ == "__main__":
    main()
