"""`StreamSource`: the network stream as the trainer's `train_source`.

    trainer = OnlineTrainer(model, args, optimizer,
                            train_source=StreamSource(expected_simulations=10,
                                                      rendezvous_dir="out/rendezvous"))

Each training rank gets its own :class:`~melissa_trainer.stream.receiver.Receiver`
(created by `start`), bound to loopback on a random port unless `bind` says otherwise;
simulations find the endpoints in `rendezvous_dir` (``MELISSA_TRAINER_RENDEZVOUS``) or
are given `endpoint` of every rank (``MELISSA_TRAINER_ENDPOINTS``).

With a `launcher` (`melissa_trainer.launcher.Launcher`), rank 0 starts the study once
every rank's receiver is up (`on_all_ranks_started`, which the trainer calls after a
barrier; call it yourself after `start` outside a trainer) and supervises it beside
training: the launcher's heartbeat is the
receiver's per-simulation message count, a simulation it gives up on is ABANDONed at
every receiver (so no rank waits for it), its state is saved in rank 0's checkpoint,
and `stop()` kills every simulation still running. Without one ("external mode") the
user starts the simulations and says how many to expect.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from melissa_trainer.buffers import Buffer
from melissa_trainer.sources import Source, SourceError
from melissa_trainer.stream import heap, protocol
from melissa_trainer.stream.control import send_abandon
from melissa_trainer.stream.endpoints import fetch_endpoints
from melissa_trainer.stream.receiver import DEFAULT_BIND, Receiver, telemetry_keys

if TYPE_CHECKING:
    from melissa_trainer.launcher import Launcher

#: seconds simulations get to exit by themselves once the stream has ended
STOP_WAIT = 10.0
#: launcher figures added to the telemetry (rank 0's; zeros elsewhere, so sums are exact)
_LAUNCHER_KEYS = ("running", "finished", "failed", "abandoned", "restarts", "redraws")

_RECEIVER_OPTIONS = frozenset(inspect.signature(Receiver).parameters) - {
    "buffer",
    "rank",
    "world_size",
}


class StreamSource(Source):
    """Fills each rank's buffer with the samples simulations stream over ZeroMQ.

    Args:
        expected_simulations: the stream ends when this many simulations have finished
            (all ranks said BYE and all their time steps arrived) or were abandoned.
            None: the launcher's `n_simulations`, or without a launcher only `finish()`
            ends it.
        bind: the endpoint each rank's receiver binds. A port other than ``*`` with
            several ranks on one host is offset by the rank (``tcp://h:5555`` -> rank r
            binds ``5555 + r``).
        rendezvous_dir: directory where each rank writes ``rank_{r}.json`` with its
            endpoint (None: ``{output_dir}/rendezvous`` under a trainer with a launcher,
            else no file; use `endpoint`).
        launcher: starts and supervises the simulations from rank 0 (see above); its
            per-job logs go to ``{output_dir}/study`` unless it says otherwise.
        max_message_bytes: bound on one field / message.
        keep_freed_memory: on glibc, let malloc recycle the memory of received frames
            in this process instead of mapping and unmapping it frame by frame (see
            `melissa_trainer.stream.heap`: process-wide; the process then keeps the
            memory of its largest burst). Set at `start`.
        **options: further `Receiver` options (``rcvhwm``, ``max_pending``,
            ``max_pending_bytes``, ``max_time_step``, ``put_timeout``, ``poll_interval``,
            ``stop_timeout``, ``curve_secret_key``, ``curve_public_key``,
            ``advertise_host``).

    Methods are called from the training thread (`finish`, `telemetry` and
    `finished_simulations` may be called from any thread).
    """

    #: every rank's receiver sees each simulation end: logged once, not summed over ranks
    study_keys = frozenset({"simulations_finished", "simulations_abandoned"})

    def __init__(
        self,
        expected_simulations: int | None = None,
        bind: str = DEFAULT_BIND,
        rendezvous_dir: str | os.PathLike[str] | None = None,
        max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES,
        launcher: Launcher | None = None,
        keep_freed_memory: bool = True,
        **options: Any,
    ) -> None:
        unknown = set(options) - _RECEIVER_OPTIONS
        if unknown:
            raise TypeError(
                f"unknown StreamSource option(s) {sorted(unknown)}; "
                f"choose from {sorted(_RECEIVER_OPTIONS)}"
            )
        if expected_simulations is not None and expected_simulations < 0:
            raise ValueError(f"expected_simulations must be >= 0, got {expected_simulations}")
        if expected_simulations is None and launcher is not None:
            expected_simulations = launcher.n_simulations
        self.launcher = launcher
        self._keep_freed_memory = bool(keep_freed_memory)
        self._output_dir: Path | None = None
        self._launcher_started = False
        self._rank = 0
        self._options: dict[str, Any] = dict(
            options,
            expected_simulations=expected_simulations,
            bind=bind,
            rendezvous_dir=rendezvous_dir,
            max_message_bytes=max_message_bytes,
        )
        self._receiver: Receiver | None = None
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
        if self.launcher is not None and self._options["rendezvous_dir"] is None:
            self._options["rendezvous_dir"] = self._output_dir / "rendezvous"

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        if self._receiver is not None:
            raise RuntimeError("StreamSource.start() was called twice")
        if self.launcher is not None and self._options["rendezvous_dir"] is None:
            raise ValueError(
                "StreamSource(launcher=...) needs rendezvous_dir= outside an OnlineTrainer "
                "(the trainer uses {output_dir}/rendezvous)"
            )
        if self._keep_freed_memory:
            heap.keep_freed_memory()
        options = dict(self._options)
        options["bind"] = _rank_bind(options["bind"], rank)
        receiver = Receiver(buffer, rank, world_size, **options)
        if self._state:
            receiver.load_state_dict({k: v for k, v in self._state.items() if k != "launcher"})
        receiver.start()
        self._receiver = receiver
        if self._finish is not None:
            receiver.finish(self._finish)
        self._rank = rank

    def on_all_ranks_started(self) -> None:
        """Rank 0 starts the study: every receiver has published its endpoint by now, so
        no simulation can read a rendezvous file left by an earlier run."""
        if self.launcher is not None and self._rank == 0 and not self._launcher_started:
            if self._receiver is None:
                raise RuntimeError("on_all_ranks_started() before start()")
            self._start_launcher(self._receiver)

    def _start_launcher(self, receiver: Receiver) -> None:
        launcher = self.launcher
        assert launcher is not None
        if self._state and self._state.get("launcher"):
            launcher.load_state_dict(self._state["launcher"])
        rendezvous = Path(self._options["rendezvous_dir"])
        study_dir = (self._output_dir or rendezvous.parent) / "study"
        curve_key = receiver.curve_public_key

        def abandon(simulation_id: int) -> None:
            endpoints = fetch_endpoints(rendezvous, timeout=60.0)
            send_abandon(endpoints, simulation_id, curve_public_key=curve_key)

        launcher.start(
            rendezvous, heartbeat=receiver.activity, abandon=abandon, study_dir=study_dir
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

    def pump(self, wait: float = 0.0) -> bool:
        """Ingest what has arrived, in the training thread (see `Receiver.pump`)."""
        return self._receiver is not None and self._receiver.pump(wait)

    def check(self) -> None:
        if self._receiver is not None:
            self._receiver.check()
        if self._launcher_started:
            assert self.launcher is not None
            try:
                self.launcher.check()
            except Exception as exc:
                raise SourceError(f"the simulation study failed: {exc}") from exc

    def stop(self) -> None:
        try:
            if self._launcher_started:
                assert self.launcher is not None
                # first: no simulation outlives the trainer. At the end of the stream the
                # simulations are closing: let them exit (their exits are recorded).
                ended = self._receiver is not None and self._receiver.ended
                self.launcher.stop(wait=STOP_WAIT if ended else 0.0)
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


def _rank_bind(bind: str, rank: int) -> str:
    """Offset an explicit TCP port by the rank, so that ranks on one host do not clash."""
    if rank == 0 or not bind.startswith("tcp://"):
        return bind
    host, _, port = bind.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return bind
    return f"{host}:{int(port) + rank}"
