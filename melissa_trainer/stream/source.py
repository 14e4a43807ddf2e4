"""`StreamSource`: the network stream as the trainer's `train_source`.

    config = ReceiverConfig(expected_simulations=10, rendezvous_dir="out/rendezvous")
    trainer = OnlineTrainer(model, args, optimizer, train_source=StreamSource(config))

Each training rank gets its own :class:`~melissa_trainer.stream.receiver.Receiver`
(created by `start`, from one `ReceiverConfig`), bound to loopback on a random port
unless `ReceiverConfig.bind` says otherwise; simulations find the endpoints in
`ReceiverConfig.rendezvous_dir` (``MELISSA_TRAINER_RENDEZVOUS``) or are given
`endpoint` of every rank (``MELISSA_TRAINER_ENDPOINTS``).

With a `launcher` (`melissa_trainer.launcher.Launcher`), rank 0 starts the study once
every rank's receiver is up (`on_all_ranks_started`, which the trainer calls after a
barrier; call it yourself after `start` outside a trainer) and supervises it beside
training. The launcher's `Study` is the one record of every simulation
(`melissa_trainer.launcher.records` has its state machine); rank 0's receiver reports to
it (the launcher's heartbeat is the receiver's per-simulation message count; a
simulation is finished once its data is complete, not when its process exits 0; a HELLO
refused for other fields fails that simulation). A simulation given up is ABANDONed at
every receiver (so no rank waits for it; a redrawn one's replacement is waited for
instead), the study's record is saved in rank 0's checkpoint, and `stop()` kills every
simulation still running. On resume every rank contributes the simulations its
checkpointed receiver has complete; any other that had run runs again (the dedup drops
what is already there). Without a launcher ("external mode") the user starts the
simulations and says how many to expect.

No silent hang, no false success: `wait_for` (through `check()`) raises `SourceError`,
so that training stops with the error, when the study failed (see `Launcher`), when no
message arrived for `stall_timeout` seconds while simulations are expected, when every
launched simulation has ended and the stream still waits (rank 0), and when the stream
ended with no finished simulation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from melissa_trainer.buffers import Buffer
from melissa_trainer.sources import Source, SourceError
from melissa_trainer.stream import heap
from melissa_trainer.stream.control import send_abandon
from melissa_trainer.stream.endpoints import fetch_endpoints
from melissa_trainer.stream.receiver import Receiver, telemetry_keys
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning

if TYPE_CHECKING:
    from melissa_trainer.launcher import Launcher

logger = logging.getLogger(__name__)

#: seconds simulations get to exit by themselves once the stream has ended
STOP_WAIT = 10.0
#: seconds the receiver must have been idle, every simulation having ended, before
#: rank 0 says the stream waits for data that will never come
ENDED_GRACE = 5.0
#: launcher figures added to the telemetry (rank 0's; zeros elsewhere, so sums are exact)
_LAUNCHER_KEYS = ("running", "exited", "finished", "failed", "abandoned", "restarts", "redraws")


class StreamSource(Source):
    """Fills each rank's buffer with the samples simulations stream over ZeroMQ.

    Args:
        config: each rank's receiver (`ReceiverConfig`: expected simulations, the
            endpoint to bind, the rendezvous directory, the study's schema, the stall
            timeout, bounds, CURVE keys); default ``ReceiverConfig()``, with two
            fill-ins: with a `launcher`, `expected_simulations` None means the
            launcher's `n_simulations`, and `rendezvous_dir` None means
            ``{output_dir}/rendezvous`` under a trainer. An explicit TCP port in
            `bind` is offset by the rank (``tcp://h:5555`` -> rank r binds
            ``5555 + r``), so that ranks on one host do not clash.
        launcher: starts and supervises the simulations from rank 0 (see above); its
            per-job logs go to ``{output_dir}/study`` unless it says otherwise.
        keep_freed_memory: opt-in, on glibc: let malloc recycle the memory of received
            frames in this process instead of mapping and unmapping it frame by frame
            (see `melissa_trainer.stream.heap` for the figures: 0.83-0.86x -> 0.95-0.97x
            the steps/s of training without ingest, on a stream of 1 MiB fields). It
            changes malloc for the whole process, for good: the process then keeps the
            memory of its largest burst. Set at `start`; default False.
        tuning: the receivers' timing (`ReceiverTuning`); the defaults suit training.

    `start` raises `OSError` when a rank cannot bind its endpoint, and `ValueError`
    with a `launcher` but no `rendezvous_dir` outside an `OnlineTrainer`.

    Methods are called from the training thread (`finish`, `telemetry` and
    `finished_simulations` may be called from any thread).
    """

    #: every rank's receiver sees each simulation end: logged once, not summed over ranks
    study_keys = frozenset({"simulations_finished", "simulations_abandoned"})

    def __init__(
        self,
        config: ReceiverConfig | None = None,
        *,
        launcher: Launcher | None = None,
        keep_freed_memory: bool = False,
        tuning: ReceiverTuning | None = None,
    ) -> None:
        config = ReceiverConfig() if config is None else config
        if config.expected_simulations is None and launcher is not None:
            config = replace(config, expected_simulations=launcher.n_simulations)
        self.config, self.tuning = config, tuning
        self.launcher = launcher
        self._keep_freed_memory = bool(keep_freed_memory)
        self._output_dir: Path | None = None
        self._launcher_started = False
        self._rank = 0
        self._resumed = False
        self._receiver: Receiver | None = None
        self._buffer: Buffer | None = None
        self._state: dict[str, Any] | None = None
        self._finish: bool | None = None

    @property
    def receiver(self) -> Receiver | None:
        """This rank's receiver (None before `start`)."""
        return self._receiver

    @property
    def endpoint(self) -> str | None:
        """This rank's endpoint, after `start`."""
        return None if self._receiver is None else self._receiver.endpoint

    @property
    def curve_public_key(self) -> str | None:
        """The CURVE server public key clients must use, or None without CURVE."""
        return None if self._receiver is None else self._receiver.curve_public_key

    def configure(self, output_dir: str) -> None:
        self._output_dir = Path(output_dir)
        if self.launcher is not None and self.config.rendezvous_dir is None:
            self.config = replace(self.config, rendezvous_dir=self._output_dir / "rendezvous")

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        if self._receiver is not None:
            raise RuntimeError("StreamSource.start() was called twice")
        if self.launcher is not None and self.config.rendezvous_dir is None:
            raise ValueError(
                "StreamSource(launcher=...) needs ReceiverConfig(rendezvous_dir=...) "
                "outside an OnlineTrainer "
                "(the trainer uses {output_dir}/rendezvous)"
            )
        if self._keep_freed_memory:
            heap.keep_freed_memory()
        config = replace(self.config, bind=_rank_bind(self.config.bind, rank))
        receiver = Receiver(buffer, rank, world_size, config, self.tuning)
        if self._state:
            receiver.load_state_dict({k: v for k, v in self._state.items() if k != "launcher"})
        receiver.start()
        self._receiver, self._buffer = receiver, buffer
        if self._finish is not None:
            receiver.finish(self._finish)
        self._rank = rank

    def on_all_ranks_started(self) -> None:
        """Rank 0 starts the study: every receiver has published its endpoint by now, so
        no simulation can read a rendezvous file left by an earlier run.

        On resume this is a collective (every rank calls it): the ranks gather the
        simulations their checkpointed receivers have complete.
        """
        if self.launcher is None or self._launcher_started:
            return
        if self._receiver is None:
            raise RuntimeError("on_all_ranks_started() before start()")
        complete = _complete_on_every_rank(self._receiver.completed()) if self._resumed else None
        if self._rank == 0:
            self._start_launcher(self._receiver, complete)

    def _start_launcher(self, receiver: Receiver, complete: set[int] | None) -> None:
        launcher = self.launcher
        assert launcher is not None
        if self._state and self._state.get("launcher"):
            launcher.load_state_dict(self._state["launcher"])
            launcher.reconcile(complete or set())
        assert self.config.rendezvous_dir is not None  # (checked at start)
        rendezvous = Path(self.config.rendezvous_dir)
        study_dir = (self._output_dir or rendezvous.parent) / "study"
        curve_key = receiver.curve_public_key

        def abandon(simulation_id: int) -> None:
            endpoints = fetch_endpoints(rendezvous, timeout=60.0)
            send_abandon(endpoints, simulation_id, curve_public_key=curve_key)

        def redrawn(simulation_id: int) -> None:
            endpoints = fetch_endpoints(rendezvous, timeout=60.0)
            send_abandon(endpoints, simulation_id, curve_public_key=curve_key, replaced=True)

        launcher.start(
            rendezvous,
            heartbeat=receiver.activity,
            abandon=abandon,
            redrawn=redrawn,
            data=receiver,
            study_dir=study_dir,
        )
        self._launcher_started = True

    def finish(self, wait: bool = True) -> None:
        """No more simulations will come: end the stream once the known ones have
        finished (`wait`) or now. May be called before `start`."""
        if self._receiver is None:
            self._finish = wait if self._finish is None else (self._finish and wait)
        else:
            self._receiver.finish(wait)

    def finished_simulations(self) -> list[int]:
        """Ids of the simulations this rank has seen finish."""
        return [] if self._receiver is None else self._receiver.finished_simulations()

    def wait_for(self, n_samples: int, timeout: float) -> None:
        """Ingest, in this thread, what has arrived (see `Receiver.pump`); with
        `timeout` > 0, go on waiting for messages and ingesting them until the buffer
        holds `n_samples` (and its watermark), the stream has ended, or `timeout`
        seconds have passed. Raises `SourceError` as `check` does, when the receiver
        cannot ingest here (ended, failed, or its thread ingesting) or before waiting.
        """
        receiver, buffer = self._receiver, self._buffer
        if receiver is None or buffer is None:
            self.check()
            return
        if timeout <= 0:
            if not receiver.pump():
                self.check()
            return
        self.check()
        deadline = time.monotonic() + timeout
        need = max(n_samples, buffer.watermark)
        while receiver.pump(timeout) and not buffer.closed and len(buffer) < need:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return
        self.check()

    def check(self) -> None:
        """Raise `SourceError` if the receiver or the study failed, if every launched
        simulation has ended and the stream still waits (rank 0), or if the stream
        ended with no finished simulation."""
        receiver = self._receiver
        if receiver is not None:
            receiver.check()
        if self._launcher_started:
            assert self.launcher is not None
            try:
                self.launcher.check()
            except Exception as exc:
                raise SourceError(f"the simulation study failed: {exc}") from exc
        if receiver is None:
            return
        ingest = receiver.ingest
        if receiver.ended:
            if ingest.simulations_finished == 0 and ingest.expected != 0:
                raise SourceError(
                    f"the stream of rank {self._rank} ended with no finished simulation "
                    f"({len(ingest.abandoned)} abandoned): there is nothing to train on"
                    + self._study_failures()
                )
            return
        launcher = self.launcher
        if (
            self._launcher_started
            and launcher is not None
            and receiver.idle_seconds() > ENDED_GRACE  # (cheap first: done reads the study)
            and launcher.done
        ):
            waiting = receiver.waiting_for()
            described = "; ".join(
                f"{launcher.describe(s)}, {receiver.describe(s)}" for s in waiting[:8]
            )
            raise SourceError(
                f"every simulation of the study has ended, but the stream of rank "
                f"{self._rank} still waits ({ingest.simulations_finished} of "
                f"{ingest.expected} expected simulations finished, "
                f"{len(ingest.abandoned)} abandoned): "
                f"{described or 'no simulation it knows is unfinished'}"
            )

    def _study_failures(self) -> str:
        if not self._launcher_started or self.launcher is None:
            return ""
        return "\n" + self.launcher.failures()

    def stop(self) -> None:
        try:
            if self._launcher_started:
                assert self.launcher is not None
                # first: no simulation outlives the trainer. At the end of the stream
                # (here, or on another rank: nothing is left to start) the simulations
                # running are the study's last and are closing: let them exit and their
                # data arrive (recorded as finished, not run again after a resume).
                ended = self._receiver is not None and self._receiver.ended
                last = ended or self.launcher.summary()["pending"] == 0
                self.launcher.stop(wait=STOP_WAIT if last else 0.0)
        finally:
            if self._receiver is not None:
                self._receiver.stop()

    def telemetry(self) -> dict[str, float]:
        if self._receiver is None:
            out = dict.fromkeys(telemetry_keys(), 0.0)
        else:
            out = self._receiver.telemetry()
        if self.launcher is not None:
            summary = self.launcher.summary() if self._launcher_started else {}
            out.update({f"launcher_{k}": float(summary.get(k, 0.0)) for k in _LAUNCHER_KEYS})
        return out

    def state_dict(self) -> dict[str, Any]:
        if self._receiver is None:
            return dict(self._state or {})
        state = self._receiver.state_dict()
        if self._launcher_started:
            assert self.launcher is not None
            state = dict(state, launcher=self.launcher.state_dict())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the dedup record of `state_dict()` (before `start`)."""
        if self._receiver is not None:
            raise RuntimeError("load_state_dict() must be called before start()")
        if state and not isinstance(state.get("simulations"), dict):
            raise ValueError("not a StreamSource state (no 'simulations' record)")
        self._state = dict(state) if state else None
        self._resumed = True


def _rank_bind(bind: str, rank: int) -> str:
    """Offset an explicit TCP port by the rank, so that ranks on one host do not clash."""
    if rank == 0 or not bind.startswith("tcp://"):
        return bind
    host, _, port = bind.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return bind
    return f"{host}:{int(port) + rank}"


def _complete_on_every_rank(mine: Sequence[int]) -> set[int]:
    """The simulations complete on every training rank (a collective when a process
    group is up: all ranks call it), from each rank's list."""
    import torch.distributed as dist  # the trainer's process group, if any

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return set(mine)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, sorted(mine))
    complete = set(gathered[0])
    for other in gathered[1:]:
        complete &= set(other)
    return complete
