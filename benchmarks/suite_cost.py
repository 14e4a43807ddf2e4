"""What the test suite spends its CPU on: every Python process it starts, and the floor
that starting them puts under the suite's wall time on a given number of cores.

    python benchmarks/suite_cost.py                       # the README's test command
    python benchmarks/suite_cost.py -- tests/examples -k heat   # any pytest arguments
    python benchmarks/suite_cost.py --report suite_cost.jsonl   # a log already taken

The suite runs with a probe in this interpreter's site-packages (a module and a
``.pth`` line that imports it at every start, removed at the end): at the exit of every
Python process of the run (pytest's workers, the trainers, ``accelerate launch`` and
its ranks, the solvers) it appends one JSON line to ``--log``: its CPU seconds (user +
system, its own, not its children's), and whether it had imported torch and
Accelerate. Processes that died by a signal (a test's ``kill -9``, a SIGTERM'd
solver) write nothing, nor do programs that are not Python (the C clients, compilers,
Slurm's daemons): the figures are lower bounds. The machine's busy CPU over the run
comes from ``/proc/stat``.

The floor: each logged process costs at least what starting a fresh interpreter and
importing what it had imported costs, by class (`START`: torch and Accelerate, torch
alone, neither: a bare interpreter), measured here `--repeats` times in turns, medians.
Whatever the tests do once started, the suite cannot take less wall time than that
floor divided by the cores: a ``--target_minutes`` wall on ``--cores`` cores is out of
reach while floor > cores x target. ``--json`` prints ``{"rows": [...]}`` (the benchmark
format: ``ratio`` = budget / floor, higher is better, 1.0 the target met at best).

This is a floor for the suite as it is: its tests start real interpreters (the
trainers, ``accelerate launch`` and its ranks, killed and resumed). It says nothing of
tests that would fork their trainers from an interpreter that imported torch once.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from melissa_trainer.common.json_output import to_json

ROOT = Path(__file__).resolve().parents[1]

#: The probe, imported by a ``.pth`` file in site-packages at every interpreter's start
#: (whatever ``PYTHONPATH`` a test gives its processes) when SUITE_COST_RUN names its
#: run: at the process's exit, one line of what it spent. A run's token keeps a run
#: inside the suite (this script's own test) apart from the run around it; a process
#: of another run, or of none, is left alone. It never raises into the process.
PROBE = """
import atexit, os

TOKEN = {token!r}


def _record():
    try:
        import json, resource, sys

        usage = resource.getrusage(resource.RUSAGE_SELF)
        record = {{
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": [os.path.basename(a) for a in sys.argv[:2]],
            "cpu": round(usage.ru_utime + usage.ru_stime, 3),
            "torch": "torch" in sys.modules,
            "accelerate": "accelerate" in sys.modules,
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
        }}
        line = json.dumps(record)
    except Exception as exc:  # an observer must not change the observed process's exit:
        line = '{{"error": "%s"}}' % type(exc).__name__  # the report counts these lines
    try:
        with open(LOG, "a") as log:  # one write() per line: O_APPEND keeps them whole
            log.write(line + "\\n")
    except OSError:  # nowhere to say it: the report's figures are lower bounds anyway
        pass


_run, _, LOG = os.environ.get("SUITE_COST_RUN", "").partition(":")
if _run == TOKEN and LOG:
    atexit.register(_record)
"""

#: The least a process costs by what it had imported at its exit: with Accelerate (a
#: trainer, a rank, ``accelerate launch``), with torch alone, with neither (an
#: interpreter's start: a solver imports numpy and the client on top of it).
START = {
    "accelerate": "import torch, accelerate",
    "torch": "import torch",
    "other": "pass",
}


def busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@contextmanager
def probe_installed() -> Iterator[str]:
    """The probe in this interpreter's site-packages for the time of the block (a module
    and the ``.pth`` line that imports it, both named by a fresh token); yields the
    token. Left behind by a SIGKILL, both are inert (no SUITE_COST_RUN names them)."""
    token = f"{os.getpid()}_{secrets.token_hex(4)}"
    site = Path(sysconfig.get_paths()["purelib"])
    module = site / f"suite_cost_probe_{token}.py"
    pth = site / f"zz_suite_cost_probe_{token}.pth"
    module.write_text(PROBE.format(token=token))
    try:
        pth.write_text(f"import suite_cost_probe_{token}\n")
        yield token
    finally:
        pth.unlink(missing_ok=True)
        module.unlink(missing_ok=True)


def run_suite(log: Path, pytest_args: list[str]) -> dict[str, Any]:
    """The suite under the probe; its exit status, wall seconds, the machine's busy CPU."""
    with probe_installed() as token:
        env = {**os.environ, "SUITE_COST_RUN": f"{token}:{log}"}
        busy, start = busy_seconds(), time.monotonic()
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
            cwd=ROOT,
            env=env,
        )
        wall = time.monotonic() - start
        return {"returncode": code, "wall": wall, "busy": busy_seconds() - busy}


def start_cost(statement: str) -> float:
    """CPU seconds of a fresh interpreter that runs `statement` (its user + system time,
    from the kernel's accounting of the child)."""
    before = os.times()
    subprocess.run([sys.executable, "-c", statement], check=True, cwd=ROOT)
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def kind(record: dict[str, Any]) -> str:
    """The `START` class of a logged process."""
    if record.get("accelerate"):
        return "accelerate"
    return "torch" if record["torch"] else "other"


def is_pytest(record: dict[str, Any]) -> bool:
    """pytest's own processes (the controller and the xdist workers, where in-process
    tests run): they import torch (tests/conftest.py) and no test is current at exit."""
    return record["test"] == "" and bool(record["torch"])


def start_costs(repeats: int) -> dict[str, float]:
    """For each `START` class, the median of `repeats` measurements, taken in turns."""
    runs: dict[str, list[float]] = {name: [] for name in START}
    for _ in range(repeats):
        for name, statement in START.items():
            runs[name].append(start_cost(statement))
    return {name: statistics.median(values) for name, values in runs.items()}


def summarise(records: list[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """(processes, CPU seconds) of the logged processes by `START` class, pytest's own
    apart ("pytest"), and of all ("all")."""
    out: dict[str, tuple[int, float]] = {}
    for r in records:
        key = "pytest" if is_pytest(r) else kind(r)
        n, cpu = out.get(key, (0, 0.0))
        out[key] = (n + 1, cpu + r["cpu"])
    out["all"] = (len(records), sum(r["cpu"] for r in records))
    return out


def by_test(records: list[dict[str, Any]], top: int) -> list[tuple[str, int, int, float]]:
    """The `top` tests whose processes spent the most CPU: (test, processes, of them
    with torch, CPU seconds)."""
    tests: dict[str, list[float]] = {}
    for r in records:
        if r["test"]:
            entry = tests.setdefault(r["test"], [0, 0, 0.0])
            entry[0] += 1
            entry[1] += bool(r["torch"])
            entry[2] += r["cpu"]
    ranked = sorted(tests.items(), key=lambda kv: -kv[1][2])[:top]
    return [(name, int(n), int(t), cpu) for name, (n, t, cpu) in ranked]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, default=Path("suite_cost.jsonl"))
    parser.add_argument("--report", type=Path, help="report on this log; run nothing")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--target_minutes", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args(argv)

    run: dict[str, Any] | None = None
    log = args.report or args.log
    if args.report is None:
        log.unlink(missing_ok=True)
        run = run_suite(log.resolve(), args.pytest_args)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    records = [r for r in lines if "error" not in r]
    failed = [r["error"] for r in lines if "error" in r]
    s = summarise(records)
    cost = start_costs(args.repeats)
    floor = sum(s.get(name, (0, 0.0))[0] * cost[name] for name in START)
    budget = args.cores * args.target_minutes * 60

    out = sys.stderr if args.json else sys.stdout
    if run is not None:
        print(
            f"suite: exit {run['returncode']}, {run['wall']:.0f} s wall, machine busy "
            f"{run['busy']:.0f} CPU-s ({run['busy'] / run['wall']:.2f} cores)",
            file=out,
        )
    n_all, cpu_all = s["all"]
    print(f"logged {n_all} Python processes, {cpu_all:.0f} CPU-s:", file=out)
    if failed:
        print(f"  ({len(failed)} more could not record themselves: {failed[0]})", file=out)
    for name in (*START, "pytest"):
        n, cpu = s.get(name, (0, 0.0))
        what = f"start-up {cost[name]:.2f} CPU-s ({START[name]!r})" if name in START else ""
        print(f"  {name:10} {n:5d} processes {cpu:7.0f} CPU-s  {what}", file=out)
    print(
        f"floor (each process at least its start-up, medians of {args.repeats}): "
        f"{floor:.0f} CPU-s; {args.target_minutes:g} min on {args.cores} cores is "
        f"{budget:.0f} CPU-s (floor / budget {floor / budget:.2f})",
        file=out,
    )
    print("the tests whose processes spent most (processes, of them torch, CPU-s):", file=out)
    for name, n, t, cpu in by_test(records, args.top):
        print(f"  {cpu:6.1f} {n:4d} {t:3d}  {name}", file=out)
    if args.json:
        rows = [
            {
                "case": f"suite start-up floor vs {args.target_minutes:g} min on "
                f"{args.cores} cores",
                "ours": round(floor, 1),
                "baseline": budget,
                "unit": "CPU-s",
                "ratio": round(budget / round(floor, 1), 3) if round(floor, 1) else None,
                "target": 1.0,
            }
        ]
        if run is not None:
            rows.append(
                {
                    "case": f"suite busy CPU vs {args.target_minutes:g} min on {args.cores} cores",
                    "ours": round(run["busy"], 1),
                    "baseline": budget,
                    "unit": "CPU-s",
                    "ratio": round(budget / round(run["busy"], 1), 3) if run["busy"] else None,
                    "target": 1.0,
                }
            )
        print(to_json({"rows": rows}))
    return 0 if run is None else int(run["returncode"] != 0)


if __name__ == "__main__":
    sys.exit(main())
