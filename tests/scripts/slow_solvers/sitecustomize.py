"""Slows the study's solvers down, for tests that need simulations to still be running
at some point: on a PYTHONPATH, every Python process starting with
``MELISSA_TRAINER_SIMULATION_ID`` and ``SOLVER_STEP_SLEEP`` in its environment (a
launched solver) sleeps that many seconds before each `Client.send`."""

import os

if os.environ.get("MELISSA_TRAINER_SIMULATION_ID") and os.environ.get("SOLVER_STEP_SLEEP"):
    import time

    from melissa_trainer.client import Client

    _pause = float(os.environ["SOLVER_STEP_SLEEP"])
    _send = Client.send

    def _slow_send(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(_pause)
        return _send(self, *args, **kwargs)

    Client.send = _slow_send  # type: ignore[method-assign]
