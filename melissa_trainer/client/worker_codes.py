"""The exit codes a worker reports for a simulation by itself (`worker.serve_simulations`),
apart from the solver's own: standard library only, so that the launcher reads them
(`launcher.exit_cause`, `launcher.advice`) without importing the client (zmq), which a
study's command line, answering before its heavy imports, must not pay."""

from __future__ import annotations

__all__ = ["NOT_DELIVERED_EXIT_CODE", "REFUSED_EXIT_CODE"]

#: The exit code `serve_simulations` reports for parameters its `check` refuses: what a
#: solver's own process exits with on a usage error (argparse's code).
REFUSED_EXIT_CODE = 2
#: The exit code `serve_simulations` reports for a simulation whose data did not reach
#: the trainer, or whose BYE it did not confirm (`gave_up.DeliveryFailed`): sysexits'
#: EX_TEMPFAIL, a failure to try again, the trainer's side, not the solver's.
NOT_DELIVERED_EXIT_CODE = 75
