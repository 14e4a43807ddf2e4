"""The solver of `paused_study.py`: streams ``x``, ``y`` and a large field ``big`` for
each of ``$SOLVER_STEPS`` steps, a new array each step (``array_reuse="never"``: the
steps queue in ZeroMQ without waiting, and a solver whose trainer stopped reading
waits in `Client.close` for it: what a paused trainer puts to the test).

Environment: ``SOLVER_STEPS``, ``SOLVER_BIG`` (float32 values of ``big``),
``SOLVER_DELAY`` (seconds after each step),
``SOLVER_TUNING`` (a JSON object of `ClientTuning` fields), ``SOLVER_MARKS`` (a
directory: the file ``{id}-{attempt}`` is created at start, so a test sees every
attempt). Values are a function of (simulation, step), so that a test checks them.
"""

import json
import os
import time
from pathlib import Path

import numpy as np

from melissa_trainer.client import Client, ClientTuning

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
(Path(os.environ["SOLVER_MARKS"]) / f"{sid}-{attempt}").write_text(str(os.getpid()))
steps, size = int(os.environ["SOLVER_STEPS"]), int(os.environ["SOLVER_BIG"])
delay = float(os.environ.get("SOLVER_DELAY", "0"))
tuning = ClientTuning(**json.loads(os.environ.get("SOLVER_TUNING", "{}")))
fields = {"x": ((3,), "float32"), "y": ((1,), "float32"), "big": ((size,), "float32")}
with Client(fields, array_reuse="never", tuning=tuning) as client:
    for t in range(steps):
        x = np.array([sid, t, sid + t / 100], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32), big=np.full(size, t, np.float32))
        time.sleep(delay)  # (a step's computation: still streaming when the trainer stops)
