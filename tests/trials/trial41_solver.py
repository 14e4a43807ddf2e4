"""User trial 41 (trial32_solver.py, each line stamped): a Python simulation that
streams (u, u_next) and asks the trainer for u_next before each step (external mode:
MELISSA_TRAINER_SIMULATION_ID, MELISSA_TRAINER_RENDEZVOUS in the environment).

    python tests/trials/trial41_solver.py STEPS TIMEOUT [SLEEP]

Prints one line per request: "ASK t <version|-> <seconds> <kind> @<wall clock>".
"""

from __future__ import annotations

import sys
import time

import numpy as np

from melissa_trainer.client import Client, PredictionUnavailable

N = 16


def main() -> int:
    steps, timeout = int(sys.argv[1]), float(sys.argv[2])
    pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    rng = np.random.default_rng()
    a = (np.eye(N, k=1) * 0.5 + np.eye(N) * 0.4).astype(np.float32)
    with Client(fields={"u": ((N,), "float32"), "u_next": ((N,), "float32")}) as client:
        u = rng.standard_normal(N).astype(np.float32)
        for t in range(steps):
            t0 = time.monotonic()
            try:
                out, version = client.predict({"u": u}, timeout=timeout)
                kind = "ok"
            except PredictionUnavailable as exc:
                version, kind = "-", f"{type(exc).__name__}:{getattr(exc, 'reason', '')}:{exc}"
            took, now = time.monotonic() - t0, time.time()
            print(f"ASK {t} {version} {took:.4f} {kind} @{now:.3f}", flush=True)
            u_next = (a @ u + 0.1 * np.sin(u)).astype(np.float32)
            client.send(t, u=u, u_next=u_next)
            u = u_next if np.abs(u_next).max() > 0.1 else rng.standard_normal(N).astype(np.float32)
            if pause:
                time.sleep(pause)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
