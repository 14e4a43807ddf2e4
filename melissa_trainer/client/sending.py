"""`Sending`: the part of `Client` that turns one time step's arrays into messages on
its transport: `send` (the fast path of `fast_send`, else the general one, which checks
and places the arrays: `send_arrays`), `flush` and `steps_sent`. The seam: `Client`
(`client`) owns the lifecycle (construction, following a restarted trainer, `close`,
`predict`); this mixin reads the attributes it sets (declared below) and calls its
`_follow` when a send finds the trainer restarted. Not thread-safe: the client's thread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from melissa_trainer import wire as protocol
from melissa_trainer.client.config import ENV_ATTEMPT, check_time_step
from melissa_trainer.client.field_part import FieldPart
from melissa_trainer.client.follow import QUERY_TIMEOUT
from melissa_trainer.client.launched_env import ENV_RESTART_COUNT
from melissa_trainer.client.send_arrays import place_parts, prepare_arrays

if TYPE_CHECKING:
    from melissa_trainer.client.fast_send import FastSend
    from melissa_trainer.client.following import Following
    from melissa_trainer.client.rerun import RerunSkip
    from melissa_trainer.client.transport import Transport

__all__ = ["Sending"]


class Sending:
    """`Client`'s sends (module docstring); `Client` sets every attribute below."""

    simulation_id: int
    rank: int
    ranks: int
    _closed: bool
    _placed: bool
    _comm: Any
    _fields: dict[str, FieldPart]
    _transport: Transport
    _fast: FastSend | None
    _following: Following | None
    #: why a receiver refused the simulation, once known (`admission_watch`, which sets it)
    _refused: str | None = None
    endpoints: list[str]
    routing: str | None
    _rendezvous: str | None
    #: a launched rerun's skip of the steps its receivers hold (`rerun`), asked at the
    #: first send (`_asked`); None: every step is sent
    _skip: RerunSkip | None = None
    _asked = False
    #: whether `send` must look at the above before sending (the first send, a refusal
    #: known, a rerun's skip): one test on the usual path instead of three
    _gate = True

    def _follow(
        self, entries: list[dict[str, Any]], ask_within: float = QUERY_TIMEOUT, whole: bool = False
    ) -> None:
        """Switch to the restarted trainer of `entries`, each receiver's HELD awaited
        `ask_within` s at most (all together if `whole`; `Client` defines it)."""
        raise NotImplementedError

    @property
    def steps_sent(self) -> int:
        """How many distinct time steps this client has sent (to all receivers; the BYE
        to each receiver carries the number sent to it)."""
        return sum(steps.count for steps in self._transport.steps)

    def send(
        self, time_step: SupportsIndex, arrays: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> None:
        """Send the fields of one time step: every declared field, each once.

        Fields are keyword arguments (`send(t, temperature=u)`) or a mapping
        (`send(t, {"temperature": u})`). Each is a numpy array of the declared dtype
        (no casting: a different dtype is an error; only the byte order is converted).
        Without `comm`, an array has the declared global shape. With `comm`, each rank
        passes its own contiguous part of the C-ordered flattened global field, of any
        shape (only its size matters); the first `send` is collective (all ranks call it,
        as SPMD codes do): it computes each rank's element offset by a scan over the
        ranks in rank order, and checks that the parts add up to the global size. A part's
        size must then stay the same; a rank whose part is empty sends no DATA for it.

        Non-C-contiguous arrays (a transposed or strided view) are copied into C order
        first. Arrays of more than `INLINE_MAX_BYTES` are sent without a copy, and by
        default this call returns once ZeroMQ has released them (see `array_reuse` for
        the other ways); smaller ones are copied (into a batch, see `batch_bytes`): the
        caller may modify them as soon as `send` returns.
        DATA of time step t goes to receiver ``(simulation_id + t) % len(endpoints)``
        when the rendezvous advertises that routing, else ``t % len(endpoints)``
        (`wire.routing`).

        Raises:
            ValueError: a missing or unknown field, a wrong shape or size, a bad time step;
                or, where the send blocked (its queue full), a receiver that refused the
                handshake (a CURVE key it does not hold: it never reads), said within a
                slice of `send_wait` (half a second), with or without `send_timeout`.
            TypeError: an array of the wrong dtype.
            TimeoutError: back-pressure lasted longer than `send_timeout`, or a receiver
                stayed disconnected for `ClientTuning.disconnected_timeout` while the
                send was blocked (the trainer is gone; the message names the endpoint
                and both settings; `send_wait.ReceiverGone`), or, its queue full or not,
                within `send_wait.LOOK_EVERY` s of a receiver's disconnection, the
                trainer's stop record says it stopped for good (`StoppedForGood`:
                "end", "error", "nonfinite"; not "preempted"). Fields already
                queued stay queued (they will be delivered if the trainer resumes), and
                an array of more than `INLINE_MAX_BYTES` may still be referenced by the
                queued message: do not modify it before `flush` returns (it waits until
                ZeroMQ has released it, as does the next `send` unless
                ``array_reuse="never"``). With a replay window
                (`ClientTuning.replay_bytes`, external mode), a trainer found restarted
                is followed instead (`melissa_trainer.client.follow`), and this is raised
                only when it cannot be (`follow.FollowError`: a step its checkpoint lacks
                has left the window, no follow socket, no restarted trainer within
                `follow_timeout`).
            SimulationRefused: (a `ValueError`) in external mode, a receiver refused the
                simulation's HELLO (other fields than the study's, its parameters
                missing) and drops everything it sends: the message names the receiver,
                its reason and the fix. Raised by the first send after the client learnt
                it (its watch asks once the HELLO has left: `admission_watch`; not by a
                first send with `comm`, which is collective), and by every later one;
                nothing more is sent.
            RuntimeError: the client is closed.
        """
        if self._closed:
            raise RuntimeError("the client is closed")
        if self._gate and self._gated(time_step):
            return  # (held by its receiver: counted in its BYE, not sent again)
        if self._following is not None:  # (external mode: `following`)
            self._following.send(self._send_once, self._follow, time_step, arrays, kwargs)
            return
        fast = self._fast
        if fast is not None and arrays is None and fast(time_step, kwargs):
            return  # the usual send, specialized (see `fast_send`)
        self._send_general(time_step, arrays, kwargs)

    def _gated(self, time_step: SupportsIndex) -> bool:
        """`send`'s checks before sending while `_gate` is up: raises for a known refusal
        (not in a collective first send), asks a rerun's receivers what they hold at the
        first send, and says whether this step is held (not to be sent)."""
        if self._refused is not None and self._placed:
            self._refuse()
        if not self._asked:
            self._ask_held()
        # Lowered only while nothing is left to look at; then raised again if the watch
        # set `_refused` meanwhile (it sets `_refused`, then `_gate`: `_set_refused`), so a
        # refusal racing this write is never lost.
        self._gate = self._skip is not None or self._refused is not None
        if not self._gate and self._refused is not None:
            self._gate = True
        # (the first send is sent on every rank, held or not; with a communicator, no
        # sign of life by the clock before the parts are placed: that send is collective,
        # and each rank's clock its own: `rerun`)
        return self._skip is not None and self._skip(
            time_step if type(time_step) is int else check_time_step(time_step),
            self._comm is None or self._placed,
        )

    def _followed(self) -> None:
        """After a switch to a restarted trainer (`Client._follow`): drop a rerun's skip.
        Its HELD replies are the old trainer's, and it counts what it skips in the old
        transport's `steps`: kept, each step it called held would be neither sent nor
        counted in the new transport's BYE, and a trainer resumed from a checkpoint
        lacking them would accept that short BYE and lose them. Every later step is sent
        (the receivers drop what they hold); `_asked` stays True (not asked again), and
        `_gated` lowers `_gate` at the next send (raising is always safe)."""
        self._skip = None
        self._gate = True

    def _set_refused(self, why: str) -> None:
        """Record that a receiver refused the simulation (`admission_watch`, any thread):
        the next send (not a collective first one) raises `SimulationRefused`."""
        self._refused = why
        self._gate = True

    def _ask_held(self) -> None:
        """At the first send of a launched attempt after the first (0-based, the
        launcher's count; a worker's: `worker_given.given_attempt`), or of a launched batch
        job Slurm requeued (``SLURM_RESTART_COUNT``: `launched_env.requeued`): ask the
        receivers which steps they hold (`rerun`; imported only then: a first attempt's
        start-up does not pay it)."""
        self._asked = True
        first = os.environ.get(ENV_ATTEMPT, "").strip() in ("", "0")  # (0: the first launch)
        if first and os.environ.get(ENV_RESTART_COUNT, "").strip() in ("", "0"):
            from melissa_trainer.client.worker_given import given_attempt  # (stdlib only)

            if not given_attempt(self.simulation_id):  # (a worker's rerun asks too)
                return
        from melissa_trainer.client.rerun import rerun_skip

        self._skip = rerun_skip(
            self._rendezvous, self.simulation_id, self.routing, self.endpoints,
            self._transport,
        )  # fmt: skip

    def _refuse(self) -> None:
        from melissa_trainer.client.admission import SimulationRefused

        raise SimulationRefused(self._refused)

    def _send_general(
        self, time_step: SupportsIndex, arrays: Mapping[str, Any] | None, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """`send`'s general path (any send may take it); returns the fields given."""
        given = kwargs
        if arrays:
            if kwargs and not arrays.keys().isdisjoint(kwargs):
                both = sorted(set(arrays) & set(kwargs))
                raise ValueError(f"fields {both} given both in the mapping and as keywords")
            given = {**arrays, **kwargs}
        prepared = self._place(time_step, given) if not self._placed else self._prepare(given)
        if type(time_step) is int and 0 <= time_step < protocol.U64_LIMIT:
            step = time_step
        else:
            step = check_time_step(time_step)
        self._transport.send_step(step, prepared)
        return given

    def flush(self) -> None:
        """Send the payloads waiting in batches now (see `batch_bytes`), and wait until
        ZeroMQ is done with every large array sent (see `array_reuse`); blocks on
        back-pressure like `send` (bounded by `send_timeout`)."""
        if self._closed:
            raise RuntimeError("the client is closed")
        if self._following is None:
            self._transport.flush()
        else:
            self._following.flush(lambda: self._transport.flush(), self._follow)

    def _send_once(
        self, time_step: SupportsIndex, arrays: Mapping[str, Any] | None, kwargs: dict[str, Any]
    ) -> Mapping[str, Any]:
        """One try of `send` (the fast path, else the general); the fields given."""
        fast = self._fast
        if fast is not None and arrays is None and fast(time_step, kwargs):
            return kwargs
        return self._send_general(time_step, arrays, kwargs)

    def _prepare(self, given: Mapping[str, Any]) -> list[tuple[FieldPart, np.ndarray]]:
        return prepare_arrays(self._fields, given, None if self._comm is None else self.rank)

    def _place(
        self, time_step: Any, given: Mapping[str, Any]
    ) -> list[tuple[FieldPart, np.ndarray]]:
        prepared = place_parts(
            self._fields, given, time_step, self._comm, self.simulation_id, self.rank, self.ranks
        )
        self._placed = True
        return prepared
