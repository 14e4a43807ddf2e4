"""Two training ranks' receivers on one rendezvous: the set-up of the routing tests
(tests/client/test_routing_client.py, tests/c/test_c_routing.py) and of the C client's
rendezvous keys (tests/c/test_c_rendezvous_key.py)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import zmq
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver

__all__ = ["two_receivers"]


def two_receivers(
    stack: ExitStack, rv: Path, expected_simulations: int, *, curve: bool = False
) -> tuple[list[FIFOBuffer], list[Receiver]]:
    """Receivers of ranks 0 and 1 of 2, started, each on a FIFO of 100 of its own, both
    publishing in the rendezvous `rv` and expecting `expected_simulations`; stopped when
    `stack` closes. With `curve`, each has a CURVE key pair of its own. Returns the
    buffers and the receivers, by rank."""
    buffers = [FIFOBuffer(100), FIFOBuffer(100)]
    receivers = []
    for rank in range(2):
        receiver = running(
            buffers[rank],
            rank=rank,
            world_size=2,
            rendezvous_dir=str(rv),
            expected_simulations=expected_simulations,
            curve_secret_key=zmq.curve_keypair()[1] if curve else None,  # None: the default
        )
        receivers.append(stack.enter_context(receiver))
    return buffers, receivers
