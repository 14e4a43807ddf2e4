"""Runs a Python callable simulation in its own process.

``python -m melissa_trainer.launcher.run_callable PATH`` loads the function that the
launcher pickled (with cloudpickle) into PATH and calls ``fn(simulation_id, parameters)``:

* as one simulation: the id and parameters come from ``MELISSA_TRAINER_SIMULATION_ID``
  and ``MELISSA_TRAINER_PARAMETERS``, judged as a `Client` (and the C client) judges
  them (client/config.py check_simulation_id, client/parameters.py check_parameters):
  one refused ends the process with status 2, its words naming the variable;
* as a worker (``MELISSA_TRAINER_WORKER`` set): once per `next_simulation()` answer,
  until nothing is left. The two variables are set to each simulation's values before
  the call, so a function whose `Client` reads them works in both modes.

An exception in the function ends the process with status 1 (its traceback goes to the
job's log), which the launcher treats as a failed simulation. A worker whose launcher is
gone (`worker_launcher.LauncherGone`: this module's loop is the library's, not the
user's) ends as the examples' solvers do: its message in one line on stderr and the
exit status of a simulation not delivered (`worker_codes.NOT_DELIVERED_EXIT_CODE`, 75),
no traceback (before: exit 1 and a traceback through this module).

PATH is a file this study's launcher wrote on this machine; nothing received from the
network is ever unpickled.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence

from melissa_trainer.client import ENV_PARAMETERS, ENV_SIMULATION_ID
from melissa_trainer.client.config import check_simulation_id
from melissa_trainer.client.parameters import check_parameters
from melissa_trainer.client.worker import next_simulation
from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE
from melissa_trainer.client.worker_launcher import ENV_WORKER, LauncherGone

__all__ = ["load", "main"]


def load(path: str) -> Callable[[int, dict[str, float]], None]:
    """The callable pickled in `path`."""
    import cloudpickle

    with open(path, "rb") as file:
        fn = cloudpickle.load(file)
    if not callable(fn):
        raise TypeError(f"{path} holds {type(fn).__name__}, not a callable")
    return fn


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pickled callable named on the command line; the process's exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        usage = "usage: python -m melissa_trainer.launcher.run_callable PICKLED_CALLABLE"
        print(usage, file=sys.stderr)
        return 2
    fn = load(args[0])
    if os.environ.get(ENV_WORKER, "").strip():
        try:
            while (work := next_simulation()) is not None:
                simulation_id, parameters = work
                os.environ[ENV_SIMULATION_ID] = str(simulation_id)
                os.environ[ENV_PARAMETERS] = json.dumps(parameters)
                fn(simulation_id, parameters)
        except LauncherGone as exc:  # (orphaned: its message is the one line to say)
            print(f"run_callable: {exc}", file=sys.stderr)
            return NOT_DELIVERED_EXIT_CODE
        return 0
    if ENV_SIMULATION_ID not in os.environ:
        print(
            f"run_callable: {ENV_SIMULATION_ID} is not set: the launcher starts this program "
            f"with it and {ENV_PARAMETERS} (run the study, not this module by hand)",
            file=sys.stderr,
        )
        return 2
    try:
        # (the rules of a Client's and the C client's: the id in ASCII digits as the
        # launcher writes it, not whatever int() takes: " 7" aside, "+7", "7_000", "\u0667")
        simulation_id = check_simulation_id(None)
        parameters = dict(check_parameters(None))
    except ValueError as exc:
        print(f"run_callable: {exc}", file=sys.stderr)
        return 2
    fn(simulation_id, parameters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
