"""Where a `ServingHook` serves the simulations: each rank's serving socket, bound beside
its receiver (`rank_server`).

With a stream source (`StreamSource`, or a `Study`'s ``stream``) the rank binds on its
receiver's interface (`serving_rendezvous.serving_bind`: the same interface, a random
port), with the stream's advertised host, CURVE keys and rendezvous directory, so that a
simulation that reached the receiver reaches the server too (``serve_{rank}.json``
beside the receiver's endpoints). An explicit `bind` serves without a stream source too;
it is offset by the rank as the receivers' is (`serving_rendezvous.serving_rank_bind`:
rank r binds an explicit TCP port + r). Neither: no socket, in-process serving only.
Requests holding NaN or Inf follow the stream's ``nonfinite`` policy (`PredictServer`;
without a stream source, the default's: refused).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from melissa_trainer.stream.handshakes import log_bound
from melissa_trainer.stream.receiver_address import curve_keys
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_rendezvous import serving_bind, serving_rank_bind
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.wire import FieldSpec

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["rank_server", "start_server"]


def rank_server(
    inputs: Sequence[FieldSpec],
    trainer: TrainerView,
    bind: str | None,
    rendezvous_dir: str | None,
    max_queue: int,
) -> PredictServer | None:
    """The serving socket's server of `trainer`'s rank, unstarted, or None when the rank
    serves in process only (no `bind` given and no stream source).

    Args:
        inputs: the requests' arrays (`PredictServer.inputs`).
        trainer: the running trainer (its source, rank, world size and run id).
        bind: the endpoint to bind, offset by the rank (`serving_rank_bind`: rank r
            binds an explicit TCP port + r); None: the receiver's interface, a random
            port.
        rendezvous_dir: where ``serve_{rank}.json`` goes; None: the stream's.
        max_queue: requests waiting at most; more are refused ``busy``.
    """
    source = trainer.source
    stream = source if isinstance(source, StreamSource) else getattr(source, "stream", None)
    if bind is None and not isinstance(stream, StreamSource):
        return None
    kwargs: dict[str, Any] = {}
    if bind is not None:  # (offset by the rank: ranks on one host do not clash)
        bind = serving_rank_bind(bind, trainer.process_index)
    if isinstance(stream, StreamSource):
        config = stream.config
        kwargs.update(
            advertise_host=config.advertise_host,
            curve=curve_keys(config.curve_secret_key, config.curve_public_key),
            rendezvous_dir=rendezvous_dir or config.rendezvous_dir,
            nonfinite=config.nonfinite,  # (requests follow the receiver's policy for NaN)
        )
        bind = bind or serving_bind(config.bind, trainer.process_index)
    else:
        kwargs.update(rendezvous_dir=rendezvous_dir)
    assert bind is not None  # (a bind given, or a stream's)
    return PredictServer(
        inputs,
        rank=trainer.process_index,
        world_size=trainer.num_processes,
        bind=bind,
        run_id=trainer.run_id,
        max_queue=max_queue,
        **kwargs,
    )


def start_server(server: PredictServer, trainer: TrainerView, logger: logging.Logger) -> None:
    """Start `trainer`'s rank's `server` (`rank_server`'s), and say to `logger` where it
    serves, with its public key (`log_bound`)."""
    server.start()
    logger.info("rank %d serves predictions at %s", trainer.process_index, server.endpoint)
    where = f"serving socket of rank {trainer.process_index}"  # (its public key)
    key = server.curve_public_key
    log_bound(logger, where, str(server.endpoint), key, "MELISSA_TRAINER_SERVE_KEY")
