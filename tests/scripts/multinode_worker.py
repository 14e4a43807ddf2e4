"""A worker (worker mode) of tests/trainer/test_multinode.py: runs in the "sims" namespace.

Asks the launcher (on node0, through CURVE) for simulations until none is left; each
streams `--steps` time steps of x (3 floats) and y = x . (1, 2, 3) to the receivers of
both nodes, found in the rendezvous directory with their CURVE keys. Before its first
request it writes ``{--record}/{pid}.json``: its network namespace and what the
launcher told it, for the test to check where it ran and how it was reached.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation
from melissa_trainer.client.worker_launcher import ENV_LAUNCHER, ENV_LAUNCHER_KEY

FIELDS = {"x": ((3,), "float32"), "y": ((1,), "float32")}
W = np.array([1.0, 2.0, 3.0], np.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--pace", type=float, default=0.0)
    opts = parser.parse_args()
    record = {
        "pid": os.getpid(),
        "netns": os.readlink("/proc/self/ns/net"),
        "launcher": os.environ.get(ENV_LAUNCHER),
        "launcher_key": bool(os.environ.get(ENV_LAUNCHER_KEY)),
        "simulations": [],
    }
    path = Path(opts.record) / f"{os.getpid()}.json"
    path.write_text(json.dumps(record))
    while (work := next_simulation(timeout=60.0)) is not None:
        simulation_id, parameters = work
        rng = np.random.default_rng(simulation_id)
        scale = np.float32(parameters["a"])
        with Client(FIELDS, simulation_id=simulation_id, parameters=parameters) as client:
            for t in range(opts.steps):
                x = (scale * rng.standard_normal(3)).astype(np.float32)
                client.send(t, x=x, y=np.array([x @ W], np.float32))
                time.sleep(opts.pace)  # (a simulation's rate: a stop test's run lasts)
        record["simulations"].append(simulation_id)
        path.write_text(json.dumps(record))


if __name__ == "__main__":
    main()
