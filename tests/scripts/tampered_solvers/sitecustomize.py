"""Test-only tampering with the study's solvers, on a PYTHONPATH: every Python process
started with ``MELISSA_TRAINER_SIMULATION_ID`` in its environment (a launched solver)

* with ``SOLVER_STEP_SLEEP=s`` sleeps `s` seconds before each `Client.send` (so that
  simulations are still running when a test needs them to be); a worker of worker mode
  too;
* with ``SOLVER_BROKEN=1`` fails at start-up like a solver whose environment lacks a
  module (a virtual environment not activated): a message on stderr, exit code 1;
* with ``SOLVER_NAN=SID:STEP`` diverges: simulation SID sends NaN in every float field
  from time step STEP on (then goes on and exits 0, as a solver that does not notice);
* with ``SOLVER_HANG=SID:STEP:PATH``, simulation SID's first attempt hangs mid-stream
  (alive and silent) where it would send STEP, and says when in PATH;
* with ``SOLVER_DISCONNECTED_TIMEOUT=s`` gives up on a trainer gone after `s` seconds
  (`ClientTuning.disconnected_timeout`, 60 by default) rather than a minute;
* with ``SOLVER_STARTUP_SLEEP=s`` sleeps `s` seconds here, at its start (a slow start-up:
  imports, a JIT), before the solver's own code runs.

and every worker of worker mode (``MELISSA_TRAINER_WORKER`` in its environment)

* with ``SOLVER_WORKER_KILL=SID:STEP:PATH`` is killed (SIGKILL, by itself) where it
  would send STEP of simulation SID, once in the study: the first worker there claims
  PATH (created exclusively) and writes its pid to it; a worker that runs SID again
  streams it whole;
* with ``SOLVER_WORKER_SCANCEL=SID:STEP:PATH``, under Slurm, cancels its own job
  (``scancel $SLURM_JOB_ID``) where it would send STEP of simulation SID, once in the
  study (PATH claimed as above), and waits for Slurm to end it.
"""

import os

if os.environ.get("MELISSA_TRAINER_SIMULATION_ID") and os.environ.get("SOLVER_BROKEN"):
    import sys

    print("ModuleNotFoundError: No module named 'mysolver'", file=sys.stderr, flush=True)
    os._exit(1)

if (
    os.environ.get("MELISSA_TRAINER_SIMULATION_ID") or os.environ.get("MELISSA_TRAINER_WORKER")
) and os.environ.get("SOLVER_STEP_SLEEP"):
    import time

    from melissa_trainer.client import Client

    _pause = float(os.environ["SOLVER_STEP_SLEEP"])
    _send = Client.send

    def _slow_send(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(_pause)
        return _send(self, *args, **kwargs)

    Client.send = _slow_send  # type: ignore[method-assign]

if os.environ.get("MELISSA_TRAINER_SIMULATION_ID") and os.environ.get("SOLVER_NAN"):
    import numpy as np

    from melissa_trainer.client import Client

    _sid, _from = (int(v) for v in os.environ["SOLVER_NAN"].split(":"))
    _send_finite = Client.send

    def _nan_send(self, time_step, arrays=None, /, **kwargs):  # type: ignore[no-untyped-def]
        if int(os.environ["MELISSA_TRAINER_SIMULATION_ID"]) == _sid and time_step >= _from:
            fields = {**(arrays or {}), **kwargs}
            arrays, kwargs = {k: np.full_like(v, np.nan) for k, v in fields.items()}, {}
        return _send_finite(self, time_step, arrays, **kwargs)

    Client.send = _nan_send  # type: ignore[method-assign]

if os.environ.get("MELISSA_TRAINER_SIMULATION_ID") and os.environ.get("SOLVER_HANG"):
    import json
    import time

    from melissa_trainer.client import Client

    # "SID:STEP:PATH": simulation SID's first attempt hangs (alive, silent) instead of
    # sending STEP, after writing {"pid", "monotonic"} to PATH: when the hang began, on
    # the system-wide monotonic clock the test reads too
    _sid, _step, _path = os.environ["SOLVER_HANG"].split(":", 2)
    _hung_send = Client.send

    def _hanging_send(self, step, *args, **kwargs):  # type: ignore[no-untyped-def]
        if (
            step == int(_step)
            and os.environ["MELISSA_TRAINER_SIMULATION_ID"] == _sid
            and os.environ.get("MELISSA_TRAINER_ATTEMPT", "0") == "0"
        ):
            record = json.dumps({"pid": os.getpid(), "monotonic": time.monotonic()})
            with open(_path + ".partial", "w") as f:
                f.write(record)
            os.replace(_path + ".partial", _path)
            time.sleep(3600)
        return _hung_send(self, step, *args, **kwargs)

    Client.send = _hanging_send  # type: ignore[method-assign]

if os.environ.get("MELISSA_TRAINER_SIMULATION_ID") and os.environ.get(
    "SOLVER_DISCONNECTED_TIMEOUT"
):
    from melissa_trainer.client import Client, ClientTuning

    _tuned_init = Client.__init__
    _disconnected = float(os.environ["SOLVER_DISCONNECTED_TIMEOUT"])

    def _tuned(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("tuning", ClientTuning(disconnected_timeout=_disconnected))
        _tuned_init(self, *args, **kwargs)

    Client.__init__ = _tuned  # type: ignore[method-assign]

if os.environ.get("MELISSA_TRAINER_SIMULATION_ID") and os.environ.get("SOLVER_STARTUP_SLEEP"):
    import time

    time.sleep(float(os.environ["SOLVER_STARTUP_SLEEP"]))

if os.environ.get("MELISSA_TRAINER_WORKER") and os.environ.get("SOLVER_WORKER_KILL"):
    import signal

    from melissa_trainer.client import Client

    _kill_sid, _kill_step, _kill_path = os.environ["SOLVER_WORKER_KILL"].split(":", 2)
    _worker_send = Client.send

    def _killed_send(self, step, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.simulation_id == int(_kill_sid) and step == int(_kill_step):
            try:  # (once in the study, whichever worker gets there first)
                fd = os.open(_kill_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)
        return _worker_send(self, step, *args, **kwargs)

    Client.send = _killed_send  # type: ignore[method-assign]

if os.environ.get("MELISSA_TRAINER_WORKER") and os.environ.get("SOLVER_WORKER_SCANCEL"):
    import subprocess
    import time

    from melissa_trainer.client import Client

    _cancel_sid, _cancel_step, _cancel_path = os.environ["SOLVER_WORKER_SCANCEL"].split(":", 2)
    _uncancelled_send = Client.send

    def _cancelled_send(self, step, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.simulation_id == int(_cancel_sid) and step == int(_cancel_step):
            try:  # (once in the study, whichever worker gets there first)
                fd = os.open(_cancel_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, os.environ["SLURM_JOB_ID"].encode())
                os.close(fd)
                subprocess.run(["scancel", os.environ["SLURM_JOB_ID"]], check=True)
                time.sleep(3600)  # (Slurm ends the job: SIGTERM, then SIGKILL)
        return _uncancelled_send(self, step, *args, **kwargs)

    Client.send = _cancelled_send  # type: ignore[method-assign]
