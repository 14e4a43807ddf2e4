"""The solver of tests/launcher/test_silence_heard_on_every_rank_e2e.py: `$RS_STEPS` steps
of one small field, `$RS_STEP_S` s apart (a sleep: a real solver's step time), numbered
0, 2, 4, ... (a solver that outputs every other iteration). Under two training ranks and
the routing ``(s + t) % 2`` every step of an odd simulation goes to receiver 1, of an
even one to receiver 0. Simulation ``$RS_HANG_SIM`` on its first attempt hangs (sleeps
forever) after sending ``$RS_HANG_AFTER`` steps, saying "hanging" on stdout first.
Simulation ``$RS_NAN_SIM`` sends NaN from its ``$RS_NAN_FROM``-th step on (every attempt).
"step t sent" on stdout after each step. Parameters, simulation id and rendezvous from
the launcher's environment."""

from __future__ import annotations

import json
import os
import time

import numpy as np

from melissa_trainer.client import Client

STEPS = int(os.environ["RS_STEPS"])
STEP_S = float(os.environ["RS_STEP_S"])
HANG_SIM = int(os.environ.get("RS_HANG_SIM", "-1"))
HANG_AFTER = int(os.environ.get("RS_HANG_AFTER", "0"))
NAN_SIM = int(os.environ.get("RS_NAN_SIM", "-1"))
NAN_FROM = int(os.environ.get("RS_NAN_FROM", "0"))

parameters = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
first = os.environ.get("MELISSA_TRAINER_ATTEMPT", "0") == "0"  # (0: the first run)
with Client({"u": ((4,), "float32")}, parameters) as client:
    for i in range(STEPS):
        if sid == HANG_SIM and first and i == HANG_AFTER:
            print("hanging", flush=True)
            time.sleep(3600)  # (killed by the launcher as hung)
        time.sleep(STEP_S)
        value = np.nan if sid == NAN_SIM and i >= NAN_FROM else parameters["k"] + i
        client.send(2 * i, u=np.full(4, value, dtype="float32"))
        print(f"step {2 * i} sent", flush=True)
