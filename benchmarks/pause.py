"""The pause a study survives with the defaults: its trainer SIGSTOPped, then continued.

    python benchmarks/pause.py [--pause 120] [--simulations 4] [--steps 12]

Runs `tests/scripts/paused_study.py` (the driver of `tests/launcher/test_pause.py`) with every
timeout at its default (`LauncherTuning()`, `ClientTuning()`): a trainer with a local
launcher, solvers that each queue ``steps`` x 2 MiB at once and wait in
`Client.close` for the trainer to read it, training slowed to 0.1 s a sample so that
the pause comes while they stream. Once 3 samples are trained on, the trainer's
process is stopped (SIGSTOP) for ``--pause`` seconds, then continued (SIGCONT).

Prints one table: the pause, the trainer's exit code, restarts, failed simulations,
whether every (simulation, step) was trained on exactly once, and the wall time; exits
1 unless the study survived (exit 0, no restart, exactly once). The library this
process imports is the one measured (``PYTHONPATH=/other/checkout`` measures that
checkout's, the driver's solvers included).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DRIVER = Path(__file__).resolve().parents[1] / "tests" / "scripts" / "paused_study.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pause", type=float, default=120.0, help="seconds stopped")
    ap.add_argument("--simulations", type=int, default=4)
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    options = {
        "simulations": a.simulations,
        "steps": a.steps,
        "big": 1 << 19,
        "sample_sleep": 0.1,
        "delay": 0.2,
    }
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        trained = out / "trained"
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(out), json.dumps(options)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env=os.environ,
        )
        try:
            while not (trained.exists() and len(trained.read_text().split()) >= 3):
                if proc.poll() is not None or time.monotonic() - started > 300:
                    print(proc.communicate()[0][-3000:])
                    return 1
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(a.pause)  # the pause measured
            os.kill(proc.pid, signal.SIGCONT)
            text, _ = proc.communicate(timeout=a.pause + 600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        wall = time.monotonic() - started
        seen = collections.Counter(trained.read_text().split())
        expected = collections.Counter(
            f"{s}:{t}" for s in range(a.simulations) for t in range(a.steps)
        )
    summary = json.loads(text.splitlines()[-1]) if proc.returncode == 0 else {}
    once = seen == expected
    rows = [
        ("pause (SIGSTOP to SIGCONT), s", f"{a.pause:.0f}"),
        ("trainer exit code", str(proc.returncode)),
        ("restarts", str(summary.get("restarts", "?"))),
        ("failed simulations", str(summary.get("failed", "?"))),
        ("every (simulation, step) exactly once", "yes" if once else "no"),
        ("wall time, s", f"{wall:.0f}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    survived = proc.returncode == 0 and summary.get("restarts") == 0 and once
    if not survived:
        print(text[-3000:])
    return 0 if survived else 1


if __name__ == "__main__":
    sys.exit(main())
