"""The solver of tests/launcher/test_rerun_sign_of_life_e2e.py and
test_rerun_first_send_e2e.py: `STEPS` steps of one small field, each computed in `STEP_S`
seconds (a sleep: the time a real solver's step takes, not a synchronisation), but step
``$RS_SLOW_AT`` (if set) in ``$RS_SLOW_S``, after a set-up of ``$RS_START_S`` s (0 unless
set) before its `Client`; "step t sent" on stdout after each (the test waits on it).
Parameters, simulation id and rendezvous from the launcher's environment."""

from __future__ import annotations

import json
import os
import time

import numpy as np

from melissa_trainer.client import Client

STEPS = int(os.environ["RS_STEPS"])
STEP_S = float(os.environ["RS_STEP_S"])
SLOW_AT = int(os.environ.get("RS_SLOW_AT", "-1"))

parameters = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
time.sleep(float(os.environ.get("RS_START_S", "0")))  # (a solver's set-up: mesh, files)
with Client({"u": ((4,), "float32")}, parameters) as client:
    for t in range(STEPS):
        time.sleep(float(os.environ["RS_SLOW_S"]) if t == SLOW_AT else STEP_S)
        client.send(t, u=np.full(4, parameters["k"] + t, dtype="float32"))
        print(f"step {t} sent", flush=True)
