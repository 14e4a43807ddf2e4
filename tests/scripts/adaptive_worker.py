"""A worker of tests/scripts/adaptive_study.py: asks for simulations until none is left;
each streams `--steps` time steps of x (3 floats) and y = a * x . (1, 2, 3), its
parameter `a` making some simulations harder to fit than others."""

from __future__ import annotations

import argparse

import numpy as np

from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

FIELDS = {"x": ((3,), "float32"), "y": ((1,), "float32")}
W = np.array([1.0, 2.0, 3.0], np.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    opts = parser.parse_args()
    while (work := next_simulation(timeout=60.0)) is not None:
        simulation_id, parameters = work
        rng = np.random.default_rng(simulation_id)
        a = np.float32(1.0 + 10.0 * parameters["a"])
        with Client(FIELDS, simulation_id=simulation_id, parameters=parameters) as client:
            for t in range(opts.steps):
                x = rng.standard_normal(3).astype(np.float32)
                client.send(t, x=x, y=np.array([a * (x @ W)], np.float32))


if __name__ == "__main__":
    main()
