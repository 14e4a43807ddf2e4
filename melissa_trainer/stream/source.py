"""`StreamSource`: the network stream as the trainer's `train_source`.

    trainer = OnlineTrainer(model, args, optimizer,
                            train_source=StreamSource(expected_simulations=10,
                                                      rendezvous_dir="out/rendezvous"))

Each training rank gets its own :class:`~melissa_trainer.stream.receiver.Receiver`
(created by `start`), bound to loopback on a random port unless `bind` says otherwise;
simulations find the endpoints in `rendezvous_dir` (``MELISSA_TRAINER_RENDEZVOUS``) or
are given `endpoint` of every rank (``MELISSA_TRAINER_ENDPOINTS``).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from melissa_trainer.buffers import Buffer
from melissa_trainer.sources import Source
from melissa_trainer.stream import protocol
from melissa_trainer.stream.receiver import DEFAULT_BIND, Receiver, telemetry_keys

_RECEIVER_OPTIONS = frozenset(inspect.signature(Receiver).parameters) - {
    "buffer",
    "rank",
    "world_size",
}


class StreamSource(Source):
    """Fills each rank's buffer with the samples simulations stream over ZeroMQ.

    Args:
        expected_simulations: the stream ends when this many simulations have finished
            (all ranks said BYE and all their time steps arrived). None: only `finish()`
            ends it.
        bind: the endpoint each rank's receiver binds. A port other than ``*`` with
            several ranks on one host is offset by the rank (``tcp://h:5555`` -> rank r
            binds ``5555 + r``).
        rendezvous_dir: directory where each rank writes ``rank_{r}.json`` with its
            endpoint (None: no file; use `endpoint`).
        max_message_bytes: bound on one field / message.
        **options: further `Receiver` options (``rcvhwm``, ``max_pending``,
            ``max_pending_bytes``, ``max_time_step``, ``put_timeout``, ``poll_interval``,
            ``stop_timeout``, ``curve_secret_key``, ``curve_public_key``,
            ``advertise_host``).

    Methods are called from the training thread (`finish`, `telemetry` and
    `finished_simulations` may be called from any thread).
    """

    def __init__(
        self,
        expected_simulations: int | None = None,
        bind: str = DEFAULT_BIND,
        rendezvous_dir: str | os.PathLike[str] | None = None,
        max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES,
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

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        if self._receiver is not None:
            raise RuntimeError("StreamSource.start() was called twice")
        options = dict(self._options)
        options["bind"] = _rank_bind(options["bind"], rank)
        receiver = Receiver(buffer, rank, world_size, **options)
        if self._state:
            receiver.load_state_dict(self._state)
        receiver.start()
        self._receiver = receiver
        if self._finish is not None:
            receiver.finish(self._finish)

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

    def check(self) -> None:
        if self._receiver is not None:
            self._receiver.check()

    def stop(self) -> None:
        if self._receiver is not None:
            self._receiver.stop()

    def telemetry(self) -> dict[str, float]:
        if self._receiver is None:
            return dict.fromkeys(telemetry_keys(), 0.0)
        return self._receiver.telemetry()

    def state_dict(self) -> dict[str, Any]:
        if self._receiver is None:
            return dict(self._state or {})
        return self._receiver.state_dict()

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
