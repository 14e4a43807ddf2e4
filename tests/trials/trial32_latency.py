"""User trial 32: a served prediction's latency against a plain in-process model call.

    PYTHONPATH=. .venv/bin/python tests/trials/trial32_latency.py [REQUESTS]

Starts `trial32_trainer.py` (one rank, external mode) with one `trial32_solver.py`
streaming, then, while it trains, asks REQUESTS (default 300) predictions one after the
other through a `Predictor` (rendezvous lookup, timeout 2 s) and times each from the
caller's side; then times the same model (16 -> 64 -> 16 MLP, one torch thread) called
in this process under `torch.no_grad()` on one (1, 16) input, and on the same input
through `torch.from_numpy` and back to numpy (what a solver calling its own copy of the
model would do). Prints medians, 90th percentiles and the versions seen. Ends both
processes (their process groups) before it returns.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from melissa_trainer.client import PredictionUnavailable, Predictor

HERE = Path(__file__).resolve().parent


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> int:
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1])}
    with tempfile.TemporaryDirectory() as tmp:
        rdv, out = Path(tmp, "rdv"), Path(tmp, "out")
        trainer = subprocess.Popen(
            [sys.executable, str(HERE / "trial32_trainer.py"), "--rendezvous", str(rdv),
             "--sims", "1", "--output_dir", str(out), "--disable_progress_bar",
             "--report_to", "none", "--logging_steps", "100000", "--save_seconds", "none"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        solver = subprocess.Popen(
            [sys.executable, str(HERE / "trial32_solver.py"), "100000", "0.5", "0.01"],
            env={**env, "MELISSA_TRAINER_SIMULATION_ID": "0",
                 "MELISSA_TRAINER_RENDEZVOUS": str(rdv)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            served, versions, failed = [], [], 0
            u = np.zeros(16, np.float32)
            with Predictor(1, rendezvous_dir=rdv) as predictor:
                while len(served) < requests:
                    if trainer.poll() is not None:
                        raise SystemExit(f"the trainer exited ({trainer.returncode})")
                    start = time.perf_counter()
                    try:
                        _, version = predictor.predict({"u": u}, timeout=2.0)
                    except PredictionUnavailable:
                        failed += 1
                        time.sleep(0.05)  # (not serving yet: its first step)
                        continue
                    if version == 0:
                        continue  # (before the first step: not what we time)
                    served.append(time.perf_counter() - start)
                    versions.append(version)
        finally:
            for proc in (solver, trainer):
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 16))
    model.eval()
    x = torch.zeros(1, 16)
    plain, numpy_round = [], []
    with torch.no_grad():
        for _ in range(2000):
            start = time.perf_counter()
            model(x)
            plain.append(time.perf_counter() - start)
        for _ in range(2000):
            start = time.perf_counter()
            model(torch.from_numpy(u)[None])[0].numpy()
            numpy_round.append(time.perf_counter() - start)
    ms = 1000.0
    print(f"served ({len(served)} requests, {failed} unavailable before; versions "
          f"{min(versions)}-{max(versions)}): median {statistics.median(served) * ms:.3f} ms, "
          f"p90 {percentile(served, 90) * ms:.3f} ms")  # fmt: skip
    print(f"in-process model call (2000): median {statistics.median(plain) * ms:.4f} ms, "
          f"p90 {percentile(plain, 90) * ms:.4f} ms")  # fmt: skip
    print(f"in-process, numpy in and out (2000): median "
          f"{statistics.median(numpy_round) * ms:.4f} ms, "
          f"p90 {percentile(numpy_round, 90) * ms:.4f} ms")  # fmt: skip
    print(f"ratio of medians (served / in-process call): "
          f"{statistics.median(served) / statistics.median(plain):.0f}x; load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
