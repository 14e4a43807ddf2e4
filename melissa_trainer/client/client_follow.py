"""`FollowsTrainer`: the part of `Client` that switches it to a restarted trainer
(external mode, with a replay window: `following`), at a send, a prediction or the
close. A mixin over `Sending`, as that one is: `Client` (`client`) owns construction and
sets every attribute declared below; moved out of `client` (the module size bound).
Not thread-safe: the client's thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from melissa_trainer.client.closing import client_logger
from melissa_trainer.client.follow import QUERY_TIMEOUT
from melissa_trainer.client.held import HeldArrays
from melissa_trainer.client.sending import Sending
from melissa_trainer.client.transport import Transport
from melissa_trainer.wire import FieldSpec

if TYPE_CHECKING:
    from melissa_trainer.client.admission_watch import AdmissionWatch
    from melissa_trainer.client.asking import Asking
    from melissa_trainer.client.parameters import Parameters

__all__ = ["FollowsTrainer"]


class FollowsTrainer(Sending):
    """`Client`'s switch to a restarted trainer (module docstring)."""

    run_id: str | None
    fields: list[FieldSpec]
    parameters: Parameters
    _array_reuse: str
    _asking: Asking
    _watch: AdmissionWatch

    def _hello(self) -> bytes:
        """The HELLO this client says (`Client` defines it)."""
        raise NotImplementedError

    def _new_transport(self, curve_keys: list[str | None], held: HeldArrays) -> Transport:
        """A transport to `self.endpoints`, not opened (`Client` defines it)."""
        raise NotImplementedError

    def _follow(
        self, entries: list[dict[str, Any]], ask_within: float = QUERY_TIMEOUT, whole: bool = False
    ) -> None:
        """Switch to the restarted trainer of `entries` (`Following.switch`; `ask_within`
        its HELD wait, for all receivers and runs asked together if `whole`)."""
        assert self._following is not None

        def make(entries: list[dict[str, Any]]) -> Transport:
            self.endpoints = [str(e["endpoint"]) for e in entries]
            self.run_id = entries[0].get("run_id")
            keys = [e.get("curve_public_key") for e in entries]
            transport = self._new_transport(keys, HeldArrays(self._array_reuse))
            transport.open(self._hello())
            return transport

        def resend(transport: Transport, step: int, arrays: dict[str, np.ndarray]) -> None:
            # (copies: the window's rows are overwritten by the next steps, and ZeroMQ
            # may still hold an array sent without a copy)
            transport.send_step(step, self._prepare({k: v.copy() for k, v in arrays.items()}))

        self._asking.before_switch()  # (its socket is of the context the switch ends)
        self._transport = self._following.switch(
            self._transport, entries, make, resend, ask_within, whole
        )
        self._followed()  # (drops a rerun's skip: it answers for the old trainer)
        self._asking.joined(self.run_id, self._transport.context)  # (asks as the new run)
        self._fast = self._transport.fast_path(list(self._fields.values()), self._comm)
        self._watch = self._watch.followed(self)  # (asks the run followed: `admission_watch`)
        client_logger().warning(
            "simulation %d rank %d: followed the restarted trainer (run %s at %s)",
            self.simulation_id, self.rank, self.run_id, ", ".join(self.endpoints),
        )  # fmt: skip

    def _follow_and_close(self, entries: list[dict[str, Any]]) -> None:
        """At close: follow the restarted trainer of `entries`, then close again."""
        assert self._following is not None
        self._follow(entries)
        self._following.close(lambda: self._transport.close(True, self._rendezvous), self._follow)
