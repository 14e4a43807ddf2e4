"""`Launcher`: runs a study's simulations next to the trainer, and restarts the failed ones.

```python
launcher = Launcher(
    "python heat.py --id {simulation_id} {parameters}",
    make_sampler("lhs", {"t0": (100, 500), "t1": (100, 500)}, seed=0),
    n_simulations=32,
    job_limit=4,
    tuning=LauncherTuning(simulation_timeout=60),  # failures and timing: `tuning`
)
source = Study(launcher)                # the trainer's source: starts and stops it
```

Policy, in short (the details are in `supervisor` and `worker_mode`):

* Simulation ids start at `first_simulation_id`, +1 per parameter set drawn; the goal is
  `n_simulations` successful simulations, with at most `job_limit` jobs alive at once.
* Each job gets ``MELISSA_TRAINER_SIMULATION_ID``, ``MELISSA_TRAINER_PARAMETERS`` (JSON),
  ``MELISSA_TRAINER_RENDEZVOUS``, ``MELISSA_TRAINER_ATTEMPT``, ``MELISSA_TRAINER_SILENCE_S``
  (its shortest silence bound: `client.rerun`) and, under a trainer, ``MELISSA_TRAINER_RUN_ID``
  (its run id: `melissa_trainer.trainer.output_lock`), plus `env`, so that
  `melissa_trainer.client.Client(fields)` needs no argument; a command template may also
  use placeholders (`templates`). A Python callable runs in a subprocess (cloudpickle).
* Success is a simulation whose data all reached the receivers and whose process
  ended (with receivers reporting data, `start(data=...)`; otherwise exit 0). A
  non-zero exit, or no heartbeat progress for `simulation_timeout` s, kills and
  restarts the simulation (same id and parameters) up to `max_restarts` times (an
  exit code among `final_exit_codes`: none); then `on_failure` decides: "redraw",
  "abandon" or "raise" (the sampler is told of one given up: `Sampler.failed`); a
  study giving up more than ``(1 - min_finished_fraction)`` of its simulations fails.
  These bounds, and the timing, are `LauncherTuning` fields (`tuning`).
  `study_record.StudyRecord` has the state machine.
* `worker=True`: long-lived jobs ask for one simulation after another (`worker`).
* No orphans: `stop()` kills every job by process group (also at interpreter exit, via
  `atexit`); local jobs also die with the trainer if it is killed (PR_SET_PDEATHSIG);
  Slurm jobs end themselves when the trainer stops renewing their lease, and a
  restarted study cancels the jobs of the run before it (`Backend.begin_study`).
* Logs: each job's output goes to ``{log_dir}/sim-{id}.log`` (or ``worker-{slot}.log``);
  a fresh study first sets aside an earlier run's (`job_logs`). Each draw (and each
  loss an adaptive sampler observed) is a row of ``{study_dir}/draws.csv``
  (`draw_log`; `draws_path`). The
  ``melissa_trainer.launcher`` logger has a line per start, end, restart and failure.

Threading: `start` runs a supervisor thread, which alone starts, polls and kills jobs.
`check`, `done`, `summary`, `state_dict` and `stop` may be called from any thread (they
take a lock that the supervisor holds only for bookkeeping, never while it waits on a
job); `load_state_dict` and `start` are called once, before the study runs. What is
read of the study's record, `observe` and the checkpoint are `launcher_record`'s; the
thread's loop, `check` and `stop`, `launcher_thread`'s.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from melissa_trainer.client import ENV_RUN_ID
from melissa_trainer.common.checks import check_count
from melissa_trainer.common.words import plural
from melissa_trainer.launcher.backends import backend_of
from melissa_trainer.launcher.backends.base import Backend, study_id
from melissa_trainer.launcher.draw_log import DRAWS_FILE, DrawLog
from melissa_trainer.launcher.inherited_env import inherited_endpoints
from melissa_trainer.launcher.job_logs import LogDirHold, take_log_dir
from melissa_trainer.launcher.jobs import Settings
from melissa_trainer.launcher.launcher_thread import LauncherThread
from melissa_trainer.launcher.log_lines import inform
from melissa_trainer.launcher.reports import DataReport
from melissa_trainer.launcher.sampler_account import warn_static_sampler
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.samplers import ListSampler, as_sampler
from melissa_trainer.launcher.simulation_record import SavedStudy
from melissa_trainer.launcher.study_change import program_of
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.supervisor import Supervisor
from melissa_trainer.launcher.templates import SimulationProgram
from melissa_trainer.launcher.tuning import LauncherTuning
from melissa_trainer.launcher.worker_mode import (
    DEFAULT_WORKER_BIND,
    WorkerSupervisor,
    check_worker_bind,
)

# (`set_aside_earlier_logs` is `job_logs`'; named here too, its import path before)
__all__ = ["Launcher"]

logger = logging.getLogger("melissa_trainer.launcher")

SimulationFn = Callable[[int, dict[str, float]], None]


class Launcher(LauncherThread):
    """Starts, watches and restarts the simulations of a study (see the module docstring).
    What may be read of it from any thread, `observe` and its checkpoint are
    `LauncherRecord`'s; its thread's loop, `check` and `stop`, `LauncherThread`'s.

    The arguments say what the study is: what runs, how many, where and how wide, what
    the jobs see. How it copes with failures and how often it polls is `tuning`
    (`LauncherTuning`: every field has a default that suits any study).

    Args:
        simulation: a command template (str, split with shlex, or a list of tokens), or a
            callable ``fn(simulation_id, parameters)`` run in a subprocess.
        sampler: where parameters come from, or a list of parameter sets.
        n_simulations: successful simulations to run (the receivers' expected count), >= 1.
        job_limit: at most this many jobs alive at once; and no new simulation starts
            while more than this many ended ones still await their data in the trainer
            (short simulations would otherwise queue the whole study's data in its
            memory).
        backend: "local", "mpiexec", "slurm" or a `Backend`.
        ranks_per_simulation: MPI ranks per job (> 1 needs an MPI backend).
        worker: worker mode (``fetch_next_parameters``): `job_limit` long-lived jobs
            each run `simulation` once and ask for simulations (`client.worker`).
        worker_bind: the ZeroMQ endpoint where workers ask for simulations (worker mode
            only). Loopback by default, which only jobs on this machine reach: a
            backend that runs jobs on other nodes ("slurm") needs an interface they
            reach, e.g. ``"tcp://*:*"``. Beyond loopback, the socket uses ZeroMQ CURVE
            with a key pair made for the study; workers get the public key in their
            environment, and peers without it get no answer.
        advertise_host: the host name given to workers for a wildcard `worker_bind`
            (default: this machine's host name).
        worker_hint: how the user of the program that makes this launcher turns worker
            mode on (an example's flag: ``"add --worker to this example's command
            line"``), which the start-up advice (`advice`) names before
            ``Launcher(..., worker=True)``; None: that alone.
        log_dir: per-job logs; default ``{study_dir}/logs``. Locked from `start` to
            `stop`: one study at a time (`job_logs.LogDirHold`).
        env: extra environment variables for every job.
        first_simulation_id: the first id drawn.
        tuning: the failure policy (timeout, restarts, `on_failure`, redraws, the share
            that must finish) and timing (poll interval, kill grace); None: the defaults.

    Raises:
        ValueError: a bad argument (named in the message), before anything starts.
    """

    def __init__(
        self,
        simulation: str | Sequence[str] | SimulationFn,
        sampler: Sampler | Sequence[Mapping[str, float]],
        n_simulations: int,
        *,
        job_limit: int = 1,
        backend: Backend | str = "local",
        ranks_per_simulation: int = 1,
        worker: bool = False,
        worker_bind: str = DEFAULT_WORKER_BIND,
        advertise_host: str | None = None,
        worker_hint: str | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        first_simulation_id: int = 0,
        tuning: LauncherTuning | None = None,
    ) -> None:
        # (0 ran, trained nothing and exited 0 with a checkpoint-0, silently)
        check_count(
            "n_simulations", n_simulations, 1, "the simulations the study runs: give 1 or more"
        )
        check_count("job_limit", job_limit, 1, "the jobs alive at once: give 1 or more")
        check_count(
            "ranks_per_simulation", ranks_per_simulation, 1, "MPI ranks per job: give 1 or more"
        )
        check_count("first_simulation_id", first_simulation_id, 0, "give 0 or more")
        if tuning is None:
            tuning = LauncherTuning()
        elif not isinstance(tuning, LauncherTuning):
            raise ValueError(
                f"tuning must be a melissa_trainer.launcher.LauncherTuning (or None for the "
                f"defaults), not {type(tuning).__name__}"
            )
        if env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ValueError("env must map variable names (str) to values (str)")

        sampler = as_sampler(sampler)  # (a str or a mapping refused, naming the fix)
        if isinstance(sampler, ListSampler) and len(sampler) < n_simulations:
            raise ValueError(
                f"the sampler lists {plural(len(sampler), 'parameter set')}, fewer than "
                f"n_simulations={n_simulations}"
            )
        sampler.plan(n_simulations)
        self._program = SimulationProgram(simulation, sampler.names, worker=worker)
        self.backend = backend_of(backend)
        if ranks_per_simulation > 1 and self.backend.name == "local":
            raise ValueError(
                f"ranks_per_simulation={ranks_per_simulation} needs an MPI backend: "
                f"backend='mpiexec' or 'slurm'"
            )

        check_worker_bind(worker_bind, self.backend.name if worker else None)
        self.n_simulations = n_simulations
        self.worker = worker
        self.tuning = tuning
        self._worker_bind, self._advertise = worker_bind, advertise_host
        self._worker_hint = worker_hint
        self._job_limit, self._ranks = job_limit, ranks_per_simulation
        self._log_dir = None if log_dir is None else Path(log_dir)
        self._env = dict(env or {})
        self.program = program_of(simulation, self._env)  # (its state: study_change)
        self._resumed = False  # (`resume`: the logs in log_dir are this study's)
        self._log_hold: LogDirHold | None = None  # (`start` to `stop`)
        self._draws_path: Path | None = None  # (`start`: the study's draws.csv)
        self._study = StudyRecord(
            sampler,
            n_simulations,
            max_restarts=tuning.max_restarts,
            on_failure=tuning.on_failure,
            max_redraws=n_simulations if tuning.max_redraws is None else tuning.max_redraws,
            first_simulation_id=first_simulation_id,
            min_finished_fraction=tuning.min_finished_fraction,
            final_exit_codes=tuning.final_exit_codes,
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._supervisor: Supervisor | None = None
        self._error: BaseException | None = None
        self._stopped = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(
        self,
        rendezvous_dir: str | os.PathLike[str],
        *,
        heartbeat: Callable[[], Mapping[int, int]] | None = None,
        abandon: Callable[[int], None] | None = None,
        study_dir: str | os.PathLike[str] | None = None,
        redrawn: Callable[[int], None] | None = None,
        data: DataReport | None = None,
        run_id: str | None = None,
    ) -> None:
        """Start the supervisor thread; returns at once (but see `study_dir`).

        Args:
            rendezvous_dir: where the receivers publish their endpoints (passed to jobs).
            heartbeat: ``{simulation id: messages received}`` (`Receiver.activity`), for
                `simulation_timeout`; called from the launcher's thread, every tick; it
                returns a snapshot (the launcher keeps it, it is not copied).
            abandon: told each simulation id abandoned, so that the receivers stop
                waiting for it; called from the launcher's thread.
            redrawn: told each simulation id given up and replaced by a redraw (the
                receivers stop waiting for it and wait for its replacement instead);
                None: `abandon` is told.
            study_dir: where the logs (default) and a pickled callable go; default: the
                parent of `rendezvous_dir`. Also the study's identity (`study_id`): the
                backend first ends the jobs an earlier run on it left (blocks for that,
                see `Backend.begin_study`; Slurm batch jobs outlive a killed trainer).
            data: what the receivers report (complete data, refused HELLOs): with it, a
                simulation is finished only once its data is complete, and an exit 0
                whose data never all arrives is a failed attempt.
            run_id: the receivers' run id, given to every job as
                ``MELISSA_TRAINER_RUN_ID``: its client then refuses a rendezvous that
                another run has rewritten, and says so, instead of streaming there.

        Raises:
            RuntimeError: called twice, or after `stop`.
            OSError: the study directory or the worker socket could not be set up.
            ConfigError: another live study's launcher holds the log folder (`LogDirHold`).
        """
        if self._thread is not None or self._stopped:
            raise RuntimeError("Launcher.start() can be called once, before stop()")
        rendezvous = Path(rendezvous_dir).absolute()
        study = Path(study_dir).absolute() if study_dir is not None else rendezvous.parent
        settings = Settings(
            job_limit=self._job_limit,
            ranks=self._ranks,
            tuning=self.tuning,
            env=self._env if run_id is None else {**self._env, ENV_RUN_ID: run_id},
            log_dir=self._log_dir.absolute() if self._log_dir else study / "logs",
            rendezvous_dir=str(rendezvous),
            worker_hint=self._worker_hint,
        )
        inherited_endpoints(settings.env, os.environ, settings.rendezvous_dir)
        # one study per log folder (released by `stop`; a refusal is a ConfigError)
        self._log_hold = take_log_dir(settings.log_dir, self._resumed)
        self.backend.begin_study(study_id(study))  # before the first launch
        command, worker_argv = self._program.commands(study, settings.rendezvous_dir)
        with self._lock:
            self._study.data_reported = data is not None
            cancelled = self._study.cancel_past_the_end()  # (resumed with fewer)
        if cancelled:
            one = len(cancelled) == 1
            inform(
                logger,
                f"resume: n_simulations={self.n_simulations} is fewer than the study's "
                f"record: {'simulation' if one else 'simulations'} {cancelled}, unfinished, "
                f"{'is' if one else 'are'} cancelled (not run again, not counted as failed)",
            )
        common = (settings, self._study, self._lock, self.backend, command, heartbeat, abandon)
        if self.worker:
            self._supervisor = WorkerSupervisor(
                *common,
                argv=worker_argv,
                bind=self._worker_bind,
                advertise_host=self._advertise,
                redrawn=redrawn,
                data=data,
            )
        else:
            self._supervisor = Supervisor(*common, redrawn=redrawn, data=data)
        warn_static_sampler(self.sampler, self.n_simulations)  # (before any draw of this run)
        # a design the draws need, optimised now rather than by a draw under the lock;
        # here, not when built: a resumed state holds it (`Sampler.prepare`)
        self.sampler.prepare()
        with self._lock:  # (a resume keeps the rows its checkpoint counted)
            saved = self._study.records if self._resumed else None
            self._study.draw_log = DrawLog.open(
                study / DRAWS_FILE,
                self.sampler.names,
                None if saved is None else {sid: r.parameters for sid, r in saved.items()},
                self._study.next_id,
                self._study.draw_rows,  # (the checkpoint's rows: the resume cut)
            )
            for sid in cancelled:  # (its last row says so, not ``draw``: forgotten now)
                self._study.draw_log.gave_up(sid, "cancelled")
            self._draws_path = self._study.draw_log.path
        self._thread = threading.Thread(target=self._run, name="melissa-launcher", daemon=True)
        atexit.register(self.stop)
        self._thread.start()
        logger.info(
            "launcher started: %s, job_limit=%d, %s backend, logs in %s",
            plural(self.n_simulations, "simulation"),
            self._job_limit,
            self.backend.name,
            settings.log_dir,
        )

    @property
    def log_dir(self) -> Path | None:
        """The job logs' directory (`log_dir`, else `{study_dir}/logs`); None before `start`."""
        return None if self._supervisor is None else self._supervisor.settings.log_dir

    @property
    def draws_path(self) -> Path | None:
        """The study's record of its draws, ``{study_dir}/draws.csv`` (`launcher.draw_log`);
        None before `start`."""
        return self._draws_path

    def resume(self, saved: SavedStudy) -> None:
        super().resume(saved)
        self._resumed = True

    def __repr__(self) -> str:
        return (
            f"Launcher(n_simulations={self.n_simulations}, job_limit={self._job_limit}, "
            f"backend={self.backend.name!r}, worker={self.worker})"
        )
