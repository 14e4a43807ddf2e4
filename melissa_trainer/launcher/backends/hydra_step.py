"""hydra's ``mpiexec`` (MPICH's) started by a trainer that runs inside a Slurm job step.

A trainer run as ``srun python train.py`` (a job step) passes its ``SLURM_*`` variables to
the simulations, and hydra, seeing them, starts its proxies with Slurm: a nested ``srun -N
1 -n 1 ... hydra_pmi_proxy``, a new step of the same job that waits for CPUs the trainer's
step holds. Nothing starts, the simulations' logs stay empty, and the trainer waits its
``startup_timeout`` (trial F7: 600 s for nothing). From a batch script itself (no step:
no ``SLURM_STEP_ID``) the nested ``srun`` is Slurm's ordinary way and works.

`hydra_step_env` decides, once per backend, from the trainer's environment:

* inside a step of an allocation on one node (``SLURM_JOB_NUM_NODES=1``), the user having
  chosen no launcher nor hosts (no ``HYDRA_LAUNCHER``/``HYDRA_BOOTSTRAP``/``HYDRA_RMK``/
  ``HYDRA_HOST_FILE`` in the environment, none of hydra's ``-launcher``, ``-bootstrap``,
  ``-rmk``, ``-hosts``, ``-f`` options in ``extra_args``): the simulations get
  ``HYDRA_LAUNCHER=fork`` (hydra starts its proxy as a child, on this node, which is the
  only node hydra could have put it on). Said once at INFO;
* inside a step of an allocation on several nodes, the same choices left to hydra: fork
  would put every rank on the trainer's node, which the user may not want, so nothing is
  changed and a WARNING says what will happen and the ways out;
* otherwise: nothing.

Other MPIs ignore ``HYDRA_*`` variables (Open MPI's ``mpirun`` in a step may have the same
problem through its own Slurm launcher: not handled, not tried). Intel MPI's hydra reads
``I_MPI_HYDRA_BOOTSTRAP``, not set here (not tried either).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["hydra_other_hosts", "hydra_step_env"]

#: hydra's variables that choose how it starts its proxies, or where: the user's choice
USER_VARIABLES = ("HYDRA_LAUNCHER", "HYDRA_BOOTSTRAP", "HYDRA_RMK", "HYDRA_HOST_FILE")
#: hydra's options that do the same (one or two dashes)
USER_OPTIONS = frozenset(
    {"launcher", "bootstrap", "rmk", "hosts", "host", "f", "hostfile", "machinefile"}
)


#: hydra's options that name other hosts than this one (its ``HYDRA_HOST_FILE`` too)
HOST_OPTIONS = frozenset({"hosts", "host", "f", "hostfile", "machinefile"})


def _options(extra_args: Sequence[str]) -> set[str]:
    return {arg.lstrip("-").split("=", 1)[0] for arg in extra_args if arg.startswith("-")}


def _chosen(environ: Mapping[str, str], extra_args: Sequence[str]) -> bool:
    """The user said how or where hydra starts its proxies."""
    if any(environ.get(name) for name in USER_VARIABLES):
        return True
    return bool(_options(extra_args) & USER_OPTIONS)


def hydra_other_hosts(environ: Mapping[str, str], extra_args: Sequence[str]) -> bool:
    """Whether hydra may start ranks on other machines than this one: hosts named
    (`HOST_OPTIONS`, ``HYDRA_HOST_FILE``), or, its launcher left to hydra, inside a
    Slurm allocation of several nodes (hydra then spreads its proxies over them)."""
    if environ.get("HYDRA_HOST_FILE") or _options(extra_args) & HOST_OPTIONS:
        return True
    if _chosen(environ, extra_args):  # (a launcher or bootstrap chosen, no hosts: fork?)
        return False
    nodes = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or ""
    return bool(environ.get("SLURM_JOB_ID")) and nodes.strip() not in ("", "1")


def hydra_step_env(
    environ: Mapping[str, str], extra_args: Sequence[str]
) -> tuple[dict[str, str], str | None, bool]:
    """(variables to add to every job's environment, a line to log once or None, whether
    that line is a warning) for an ``mpiexec`` started from the environment `environ`
    with `extra_args` (module docstring)."""
    step, job = environ.get("SLURM_STEP_ID"), environ.get("SLURM_JOB_ID")
    if not step or not job or _chosen(environ, extra_args):
        return {}, None, False
    nodes = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or ""
    where = f"the trainer runs in Slurm job step {job}.{step}"
    if nodes.strip() == "1":
        return (
            {"HYDRA_LAUNCHER": "fork"},
            f"{where}, on one node: the simulations' mpiexec gets HYDRA_LAUNCHER=fork "
            "(hydra would otherwise start its proxies with a nested srun, which waits for "
            "the CPUs this step holds: the simulations would never start). Set "
            "HYDRA_LAUNCHER, or pass -launcher in MpiexecBackend(extra_args=...), to choose",
            False,
        )
    return (
        {},
        f"{where}, of an allocation of {nodes or 'several'} nodes: hydra's mpiexec (MPICH) "
        "will start its proxies with a nested srun, which waits until the CPUs this step "
        "holds are free, so the simulations may never start (the trainer then waits "
        "startup_timeout). Ways out: start the trainer without srun (in the batch script "
        "itself), or leave CPUs to the simulations (srun --cpus-per-task less than the "
        'allocation), or MpiexecBackend(extra_args=["-launcher", "fork"]) to run every '
        "rank on this node, or SlurmBackend",
        True,
    )
