"""How long a stop takes to end N running solvers that are slow to exit on SIGTERM.

A stop (the trainer's end, a preemption, a failure) ends every running job. Ours:
`LocalBackend.kill_all`, SIGTERM to every job, then one `kill_grace` for them all, then
SIGKILL. Baseline: the same backend's jobs killed one after another (`Backend.kill_all`'s
default, what `Supervisor.shutdown` did before: each job given its whole grace).

Each solver is a Python process that, on SIGTERM, takes ``--exit`` seconds to exit (a
restart file written, say), or ignores SIGTERM with ``--exit -1`` (then only the SIGKILL
at the grace ends it). Cases: 6 and 16 solvers exiting 1 s after SIGTERM, grace 5 s;
6 ignoring it, grace 1 s. Ours and the baseline in turn (A B A B), medians of the
wall time of the kill, from its call to its return; ratio = baseline / ours (higher is
better). Target: ratio >= N / 2 (the graces overlap; N would be perfect).

    python benchmarks/stop_time.py            # about 2 minutes
    python benchmarks/stop_time.py --quick    # about 30 s
    python benchmarks/stop_time.py --json     # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from melissa_trainer.common.json_output import to_json
from melissa_trainer.launcher.backends import Job, LocalBackend
from melissa_trainer.launcher.backends.base import Backend

SOLVER = """
import signal, sys, time
from pathlib import Path
up, exit_after = Path(sys.argv[1]), float(sys.argv[2])
def term(*_):
    time.sleep(exit_after)
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if exit_after < 0 else term)
up.touch()
while True:
    time.sleep(1)
"""

#: (solvers, seconds each takes to exit after SIGTERM (-1: ignores it), kill_grace)
CASES = [(6, 1.0, 5.0), (16, 1.0, 5.0), (6, -1.0, 1.0)]


def one_stop(here: Path, n: int, exit_after: float, grace: float, together: bool) -> float:
    """Start `n` solvers, wait until each runs, kill them all; the kill's wall seconds."""
    backend = LocalBackend()
    for old in here.glob("*.up"):
        old.unlink()
    handles = []
    for i in range(n):
        argv = [sys.executable, str(here / "solver.py"), str(here / f"{i}.up"), str(exit_after)]
        handles.append(backend.launch(Job(f"sim-{i}", argv)))
    deadline = time.monotonic() + 60
    while sum(1 for _ in here.glob("*.up")) < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the solvers did not start within 60 s")
        time.sleep(0.02)
    start = time.perf_counter()
    if together:
        backend.kill_all(handles, grace)
    else:
        Backend.kill_all(backend, handles, grace)  # (the default: one after another)
    took = time.perf_counter() - start
    backend.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="stops of each kind per case")
    parser.add_argument("--quick", action="store_true", help="one stop of each, two cases")
    parser.add_argument("--json", action="store_true", help='print {"rows": [...]}')
    args = parser.parse_args()
    reps = 1 if args.quick else args.reps
    cases = CASES[::2] if args.quick else CASES
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        (here / "solver.py").write_text(SOLVER)
        for n, exit_after, grace in cases:
            ours, base = [], []
            for _ in range(reps):  # (interleaved: A B A B)
                ours.append(one_stop(here, n, exit_after, grace, together=True))
                base.append(one_stop(here, n, exit_after, grace, together=False))
            o, b = statistics.median(ours), statistics.median(base)
            what = f"exit {exit_after:g} s after SIGTERM" if exit_after >= 0 else "ignore SIGTERM"
            rows.append({
                "case": f"stop of {n} solvers that {what}, kill_grace {grace:g} s",
                "ours": round(o, 3),
                "baseline": round(b, 3),
                "unit": "s",
                "ratio": round(b / o, 2),
                "target": n / 2,
            })  # fmt: skip
    if args.json:
        print(to_json({"rows": rows}))
        return
    for row in rows:
        print(
            f"{row['case']}: together {row['ours']:.2f} s, one after another "
            f"{row['baseline']:.2f} s ({row['ratio']}x, target >= {row['target']:g}x)"
        )


if __name__ == "__main__":
    main()
