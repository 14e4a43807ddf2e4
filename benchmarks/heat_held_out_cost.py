"""What the heat example's held-out set costs: the example at its defaults with
``--num_validation 32`` (its default: tails over 32 held-out simulations) and with
``--num_validation 4`` (the former default, whose 99th percentile was its worst), in
pairs whose order alternates, each run in its own process; per run its wall seconds and
its CPU seconds (user + system of the example and its 64 solvers, as `time` counts
them), and the machine's load average before it.

Rows (``--json``): per pair, ``ours`` the run with 32, ``baseline`` the one with 4,
ratio ours / baseline, for the wall and for the CPU. A busy machine moves both far more
than the held-out set does (compare the pairs' spread with their ratio); the set's own
cost, apart from the load: its solves and one pass of the model over it, printed first.

    python benchmarks/heat_held_out_cost.py --pairs 2
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, print_json, print_rows  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "heat_pde" / "train.py"


def run(num_validation: int, out: Path) -> dict[str, float]:
    """One default run of the example: its wall and CPU seconds, the load before it."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, str(EXAMPLE), "--num_validation", str(num_validation),
         "--output_dir", str(out), "--no_plot", "--disable_progress_bar"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "load": load}


def own_cost(counts: tuple[int, ...]) -> None:
    """The set's solves and one pass of the default model over it (features and forward),
    in this process's CPU seconds: what the set adds apart from the load."""
    sys.path.insert(0, str(EXAMPLES))
    from heat_pde import train

    _, opts = train.parser([]).parse_args_into_dataclasses([])
    model = train.make_model(opts.grid_size, opts.hidden)
    train.validation_set(opts)  # (a first call pays the imports and the caches)
    for count in counts:
        opts.num_validation = count
        start = time.process_time()
        samples = train.validation_set(opts)
        solved = time.process_time() - start
        features = train.make_process_sample(opts.time_steps)
        start = time.process_time()
        with torch.no_grad():
            model(torch.stack([features(s)[0] for s in samples]))
        print(f"{count} held-out simulations: solved in {solved:.3f} CPU-s, one pass of the "
              f"model over them {time.process_time() - start:.3f} CPU-s", flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=2)
    add_flags(p)
    opts = p.parse_args()
    own_cost((32, 4))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="heat-held-out-") as work:
        for pair in range(opts.pairs):
            order = (32, 4) if pair % 2 == 0 else (4, 32)
            got = {n: run(n, Path(work) / f"{pair}-{n}") for n in order}
            for n in order:
                wall, cpu, load = got[n]["wall"], got[n]["cpu"], got[n]["load"]
                print(f"pair {pair}, num_validation {n}: wall {wall:.1f} s, CPU {cpu:.1f} "
                      f"s, load before {load:.2f}", flush=True)  # fmt: skip
            for key, unit in (("wall", "s"), ("cpu", "CPU-s")):
                rows.append({"case": f"pair {pair} ({order[0]} first): {key}, 32 / 4 held out",
                             "ours": round(got[32][key], 2), "baseline": round(got[4][key], 2),
                             "unit": unit, "ratio": round(got[32][key] / got[4][key], 3),
                             "target": None})  # fmt: skip
    print_rows(rows, "the heat example at its defaults: 32 held-out simulations against 4")
    if opts.json:
        print_json(rows)


if __name__ == "__main__":
    main()
