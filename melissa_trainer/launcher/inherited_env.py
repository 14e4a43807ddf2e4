"""A client variable in the trainer's own environment that every launched job inherits.

Each job runs with the launcher's environment under its own variables (`Job.full_env`,
Slurm's ``sbatch --export=ALL``). The launcher sets ``MELISSA_TRAINER_RENDEZVOUS`` but not
``MELISSA_TRAINER_ENDPOINTS``, which a client takes before the rendezvous: one left in the
shell that started the trainer (an earlier solver run by hand) sends every simulation to
those endpoints. A user trial (a 2-rank Fortran solver, ``tcp://localhost:5599`` left in
the environment): every attempt failed at its close after the client's 60 s, the study
stopped after 4 attempts and 2.5 minutes, and nothing named the variable. Given in
``Launcher(env=...)``, it is meant: no warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from melissa_trainer.client import ENV_ENDPOINTS

logger = logging.getLogger(__name__)

__all__ = ["inherited_endpoints"]


def inherited_endpoints(
    job_env: Mapping[str, str], environ: Mapping[str, str], rendezvous_dir: str
) -> str | None:
    """The WARNING said (and logged) when `environ` (the launcher's) sets
    ``MELISSA_TRAINER_ENDPOINTS`` and `job_env` (the jobs' own variables) does not, or
    None."""
    value = environ.get(ENV_ENDPOINTS, "").strip()
    if not value or ENV_ENDPOINTS in job_env:
        return None
    said = (
        f"{ENV_ENDPOINTS}={value!r} is set in this process's environment, and every "
        f"simulation the launcher starts inherits it: its client sends there, not to this "
        f"study's receivers (their rendezvous, {rendezvous_dir}); a wrong one fails every "
        f"simulation at its close, after the client's disconnected timeout (60 s). Unset it "
        f"(unset {ENV_ENDPOINTS}) before starting the trainer; to send the simulations "
        f"there on purpose (a tunnel), give it as Launcher(env={{'{ENV_ENDPOINTS}': ...}})"
    )
    logger.warning("%s", said)
    return said
