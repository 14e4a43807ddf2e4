"""Worker mode (Melissa's ``fetch_next_parameters``): long-lived jobs that ask for work.

Up to `job_limit` *workers* run the simulation command, each in a slot
(``worker-{slot}``, relaunched as ``worker-{slot}-r{n}``). A worker calls
`melissa_trainer.client.worker.next_simulation()`, a JSON request on the launcher's
ZeroMQ REP socket (bound on loopback unless the launcher says otherwise, passed in
``MELISSA_TRAINER_LAUNCHER``), which
reports its previous simulation as finished and gets the next one (its id, parameters
and attempt: the messages, `melissa_trainer.client.worker`), or None when nothing is
left. The policy of `Supervisor` applies to each simulation:

* success: the worker asked for more (reporting it finished), or exited 0 while
  running it;
* failure: the worker exited non-zero, reported its simulation failed
  (``next_simulation(exit_code=1)``: the worker lives on, its start-up not paid again),
  or its current simulation was silent for `simulation_timeout` s (the worker is then
  killed). The simulation goes back to the
  queue for the next request; the slot's worker is relaunched while work remains.

A worker is launched only while there is more work than idle workers. One that keeps
exiting without ever taking a simulation (a start-up crash) ends the study after
`max_restarts` + 1 such exits in a row. The timeout applies to a worker's simulations,
not to its start-up. Once the study is done, workers are told "nothing left"; those
still alive `EXIT_GRACE` s later are killed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import zmq

from melissa_trainer.client.config import ENV_RENDEZVOUS
from melissa_trainer.client.worker import PROTOCOL_VERSION
from melissa_trainer.client.worker_launcher import (
    ENV_LAUNCHER,
    ENV_LAUNCHER_KEY,
    ENV_LAUNCHER_PROCESS,
    ENV_WORKER,
    launcher_process,
)
from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.exit_cause import code_text, codes_text
from melissa_trainer.launcher.jobs import RunningJob
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.launcher.supervisor import Supervisor
from melissa_trainer.launcher.templates import silence_env
from melissa_trainer.stream.liveness import LISTEN_BACKLOG
from melissa_trainer.stream.receiver_address import advertised, is_loopback

__all__ = ["DEFAULT_WORKER_BIND", "EXIT_GRACE", "WorkerSupervisor", "check_worker_bind"]

logger = logging.getLogger("melissa_trainer.launcher")

#: Where workers ask for simulations by default: only jobs on this machine reach it.
DEFAULT_WORKER_BIND = "tcp://127.0.0.1:*"
#: Seconds workers have to exit once the study is done, before they are killed.
EXIT_GRACE = 10.0
_MAX_REQUEST_BYTES = 1 << 16


def check_worker_bind(bind: Any, backend: str | None) -> None:
    """Raise ValueError unless `bind` is a ZeroMQ endpoint the workers of `backend` (its
    name; None: not in worker mode) can reach: a backend that runs jobs on other nodes
    ("slurm") needs more than loopback."""
    if not isinstance(bind, str) or not bind.startswith(("tcp://", "ipc://")):
        raise ValueError(f"worker_bind must be a ZeroMQ tcp:// or ipc:// endpoint, not {bind!r}")
    if backend == "slurm" and is_loopback(bind):
        raise ValueError(
            f"worker mode with the slurm backend runs workers on compute nodes, which "
            f"cannot reach worker_bind={bind!r}: bind an interface they reach, "
            f"e.g. worker_bind='tcp://*:*' (and advertise_host if needed)"
        )


class WorkerSupervisor(Supervisor):
    """Supervises workers (see the module docstring); `argv` is the worker command.

    The socket is bound at construction (errors surface in `Launcher.start`) and then
    used by the launcher's thread only.
    """

    worker_mode = True  # (start-up is paid once per job already: `advice`)

    def __init__(
        self,
        *args: Any,
        argv: list[str],
        bind: str = DEFAULT_WORKER_BIND,
        advertise_host: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.argv = argv
        self.slots: list[str | None] = [None] * self.settings.job_limit  # job name per slot
        self.launches = [0] * self.settings.job_limit
        self.idle_exits: list[list[int]] = [[] for _ in range(self.settings.job_limit)]
        self.told_none: set[str] = set()  # workers answered "nothing left"
        # (`launched_at`, the base class's: when each worker not heard from yet was
        # launched; its start-up, paid once per job, is timed from there to its first
        # request)
        self.done_since: float | None = None
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REP)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.MAXMSGSIZE, _MAX_REQUEST_BYTES)
        self.socket.setsockopt(zmq.BACKLOG, LISTEN_BACKLOG)  # (hundreds of workers at once)
        #: the CURVE public key workers need (Z85), None on loopback
        self.curve_public_key: str | None = None
        if not is_loopback(bind):  # encrypted, and answered only to peers with the key
            if zmq.has("curve"):
                public, secret = zmq.curve_keypair()
                self.socket.curve_server = True
                self.socket.curve_secretkey = secret
                self.curve_public_key = public.decode("ascii")
            else:
                logger.warning("libzmq lacks CURVE: requests to %s travel in clear", bind)
        try:
            self.socket.bind(bind)
        except zmq.ZMQError as exc:
            self.close_socket()
            raise OSError(f"the launcher cannot bind worker_bind={bind!r}: {exc}") from exc
        bound = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.endpoint: str = advertised(bound, advertise_host)
        if not is_loopback(self.endpoint):
            logger.info("workers ask for simulations at %s", self.endpoint)

    # -- the loop -------------------------------------------------------------------------

    def tick(self) -> None:
        now = time.monotonic()
        self.serve()
        self.poll_jobs(now)
        self.check_data(now)
        self.check_timeouts(now)
        self.launch_jobs(now)
        self.retire(now)
        self.explain_silence(now)

    def wait(self, stop: threading.Event) -> None:
        # Requests are answered as they come, not once per poll interval.
        deadline = time.monotonic() + self.settings.tuning.poll_interval
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.socket.poll(int(min(left, 0.05) * 1000) + 1):
                self.serve()

    def shutdown(self, why: str = "the study stops") -> None:
        try:
            super().shutdown(why)
        finally:
            self.close_socket()

    def close_socket(self) -> None:
        self.socket.close(linger=0)
        self.context.term()

    # -- requests -------------------------------------------------------------------------

    def serve(self) -> None:
        """Answer every request waiting on the socket."""
        while self.socket.poll(0):
            raw = self.socket.recv()
            self.socket.send(json.dumps(self.answer(raw)).encode())

    def answer(self, raw: bytes) -> dict[str, Any]:
        try:
            request = json.loads(raw)
            name, finished = request["worker"], request["finished"]
            if request.get("version") != PROTOCOL_VERSION or not isinstance(name, str):
                raise ValueError(f"version {request.get('version')!r}, worker {name!r}")
            if finished is not None and (
                isinstance(finished, bool) or not isinstance(finished, int)
            ):
                raise ValueError(f"finished={finished!r}")
            # the worker's verdict on `finished`: 0 it finished, else it failed
            # (`next_simulation(exit_code=...)`: the worker lives on)
            code = request.get("exit_code", 0)
            if isinstance(code, bool) or not isinstance(code, int):
                raise ValueError(f"exit_code={code!r}")
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("malformed worker request dropped: %r", exc)
            return _reply(error=f"malformed request: {exc!r}")
        job = self.jobs.get(name)
        if job is None:  # e.g. a worker killed for a timeout while its request was queued
            return _reply(error=f"{name} is not a live worker of this launcher")
        now = time.monotonic()
        launched = self.launched_at.pop(name, None)
        if launched is not None:  # its first request: its start-up is over
            self.advice.worker_started(now - launched)
        if finished != job.simulation_id:
            return _reply(
                error=f"{name} reports simulation {finished} finished, but it runs "
                f"{job.simulation_id}"
            )
        if finished is not None:
            job.simulation_id = None
            where = self.backend.ran_on(job.handle)
            self.end_simulation(finished, code, now, job.log_path, reported=True, node=where)
        if self._awaiting_data() > self.data_bound():
            self.take_completed()  # (the receivers may have it since the last tick)
        if self._awaiting_data() > self.data_bound():
            # as in `Supervisor.launch_jobs`: at most job_limit ended simulations await
            # their data; ask again soon
            return _reply(simulation_id=None, retry=RETRY)
        taken = self.take(now)
        if taken is None:
            self.told_none.add(name)
            return _reply(simulation_id=None)
        sid, parameters, attempt = taken
        job.assign(sid, now, self.beat_of(sid))
        self.idle_exits[self.slot_of(name)].clear()
        logger.info("simulation %d started on %s (attempt %d): %s", sid, name, attempt, parameters)
        return _reply(simulation_id=sid, parameters=parameters, attempt=attempt)

    # -- workers --------------------------------------------------------------------------

    def launch_jobs(self, now: float) -> None:
        with self.lock:
            work = self.study.work_left()
        idle = sum(
            1 for n, j in self.jobs.items() if j.simulation_id is None and n not in self.told_none
        )
        for slot, name in enumerate(self.slots):
            if work <= idle:
                return
            if name is not None and name in self.jobs:
                continue
            n = self.launches[slot]
            name = f"worker-{slot}" if n == 0 else f"worker-{slot}-r{n}"
            log_path = self.settings.log_dir / f"worker-{slot}.log"
            env = {
                **self.settings.env,
                ENV_RENDEZVOUS: self.settings.rendezvous_dir,
                ENV_LAUNCHER: self.endpoint,
                ENV_WORKER: name,
                # (its simulations' rerun signs of life: the bound only grows, `shortest`)
                **silence_env(self.silence.shortest()),
            }
            if self.curve_public_key is not None:
                env[ENV_LAUNCHER_KEY] = self.curve_public_key
            # (this process, the launcher's: a worker that finds it ended says so at once,
            # even orphaned before it started, instead of waiting for an answer)
            if (process := launcher_process()) is not None:
                env[ENV_LAUNCHER_PROCESS] = process
            # (read before the launch, as a simulation's start-up in the plain mode: a
            # backend slow to return, or a launcher thread descheduled on a loaded node,
            # would otherwise hide part of the worker's start-up from `startup_seconds`)
            launched = time.monotonic()
            job = Job(name, self.argv, env, None, log_path, self.settings.ranks)
            handle = self.start_job(job, f"launch {n + 1}")  # (the slot: in its name)
            self.slots[slot], self.launches[slot] = name, n + 1
            self.jobs[name] = RunningJob(handle, None, log_path)
            self.launched_at[name] = launched
            idle += 1
            logger.info("worker started: %s", self.backend.describe(handle))

    def job_ended(self, job: RunningJob, code: int, now: float) -> None:
        name = job.handle.job.name
        self.launched_at.pop(name, None)  # (one that never asked: no start-up to count)
        told_none = name in self.told_none
        self.told_none.discard(name)
        if job.simulation_id is not None:  # exit 0 after its simulation is a success
            where = self.backend.ran_on(job.handle)
            self.end_simulation(job.simulation_id, code, now, job.log_path, node=where)
            return
        if told_none and code == 0:
            logger.info("%s exited (nothing left)", name)
            return
        if told_none:
            logger.warning(
                "%s exited with code %s after its last simulation", name, code_text(code)
            )
            return
        exits = self.idle_exits[self.slot_of(name)]
        exits.append(code)
        logger.warning(
            "%s exited with code %s before taking a simulation; log: %s",
            name,
            code_text(code),
            job.log_path,
        )
        if len(exits) > self.settings.tuning.max_restarts:
            raise LauncherError(
                f"{name} exited {len(exits)} times in a row without taking a simulation "
                f"(exit codes {codes_text(exits)}); see its log {job.log_path}"
            )

    def retire(self, now: float) -> None:
        """Once the study is done, kill the workers that do not exit on their own."""
        with self.lock:
            done = self.study.done
        if not done or not self.jobs:
            return
        if self.done_since is None:
            self.done_since = now
        elif now - self.done_since > EXIT_GRACE:
            logger.warning(
                "workers still alive %.0f s after the study ended: killing them", EXIT_GRACE
            )
            jobs = list(self.jobs.items())  # (together: one grace for them all)
            why = f"the study is done, and the worker did not exit within {EXIT_GRACE:g} s"
            grace = self.settings.tuning.kill_grace
            self.backend.kill_all([job.handle for _, job in jobs], grace, [why] * len(jobs))
            for name, _ in jobs:  # (after it: a failed one leaves them to the stop's)
                del self.jobs[name]

    def slot_of(self, name: str) -> int:
        return self.slots.index(name)


#: seconds a worker waits before asking again when ended simulations await their data
RETRY = 0.01


def _reply(**fields: Any) -> dict[str, Any]:
    return {"version": PROTOCOL_VERSION, **fields}
