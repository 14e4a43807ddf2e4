"""Whether the trainer took this simulation: asked at `Client.close`, once the BYE left.

PUSH/PULL acknowledges nothing. A receiver that refuses a simulation's HELLO (fields of
another shape than the study's, parameters missing: `stream.schema`) drops everything
it sends and logs why, but the simulation would end with exit status 0 as if trained
on. So a client whose endpoints came from a rendezvous (``MELISSA_TRAINER_RENDEZVOUS``)
asks each receiver, on the follow socket the rendezvous names (``follow_endpoint``),
an ADMISSION_QUERY (docs/protocol.md, section 17a), and `confirm_admitted` raises
`SimulationRefused` with the receiver's reason if one refused it.

A receiver that has not processed the simulation's HELLO yet (busy, or back-pressured)
says unknown: it is asked again, with growing pauses, for up to `ADMISSION_TIMEOUT`
seconds. Nothing is decided without an answer: a receiver that names no follow socket
(an older trainer, or endpoints given directly), a rendezvous rewritten by another run
or marked stopped, a malformed reply (counted in `rejected`, ignored) or no decided
answer in time leave the close as it was before this check (a warning says that the
admission could not be confirmed, when a receiver was asked and did not say).

A receiver that answers the close receipt (RECEIPT_QUERY, section 17b: its rendezvous
file lists 13 in ``follow_kinds``) is asked that instead, which carries the admission
and whether the BYE is in (`melissa_trainer.client.confirm`); this question is for older
receivers. The same question, asked while the simulation runs, is `admission_watch`'s.

Not thread-safe: one thread per call (the closing thread, or the watch's own). Sockets
of a context of its own, ended before it returns.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client.sockets import control_dealer
from melissa_trainer.client.tuning import DEFAULT_DISCONNECTED_TIMEOUT
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.wire import AdmissionReply, ProtocolError

__all__ = ["ADMISSION_TIMEOUT", "SimulationRefused", "check_admission", "confirm_admitted"]

#: seconds a closing client waits for each receiver to say accepted or refused
ADMISSION_TIMEOUT = 10.0
#: seconds a reply is waited for between two looks at `stop` (a watch, `admission_watch`)
STOP_SLICE = 0.02
_request_ids = itertools.count(1)


class SimulationRefused(ValueError):
    """A receiver refused the simulation's HELLO and dropped everything it sent (the
    message names the receiver, its reason and the fix). A `ValueError`, as a refused
    CURVE handshake at close: the simulation, not the trainer, must change."""


def check_admission(
    rendezvous: str,
    endpoints: Sequence[str],
    simulation_id: int,
    rank: int,
    rejected: Counter[str],
    timeout: float = ADMISSION_TIMEOUT,
    disconnected_timeout: float | None = DEFAULT_DISCONNECTED_TIMEOUT,
) -> None:
    """`Client.close`'s check, after the BYE left: the rendezvous read again (not
    waited for: a trainer stopped or restarting since is not asked), then
    `confirm_admitted`; a receiver asked that did not say is a warning.

    Raises:
        SimulationRefused: a receiver refused the simulation's HELLO.
    """
    try:
        entries = fetch_rendezvous(rendezvous, timeout=0.0)
    except (TimeoutError, OSError):
        return
    answered = confirm_admitted(
        entries, endpoints, simulation_id, rejected, timeout, disconnected=disconnected_timeout
    )
    if answered is False:
        from melissa_trainer.client.closing import client_logger

        client_logger().warning(
            "simulation %d rank %d: the trainer did not confirm within %.0f s that it "
            "took this simulation%s; its receivers' logs say whether they refused it",
            simulation_id,
            rank,
            timeout,
            f" (malformed replies ignored: {dict(rejected)})" if rejected else "",
        )


def confirm_admitted(
    entries: Sequence[dict[str, Any]],
    endpoints: Sequence[str],
    simulation_id: int,
    rejected: Counter[str],
    timeout: float = ADMISSION_TIMEOUT,
    trusted: Callable[[str], bool] | None = None,
    stop: threading.Event | None = None,
    disconnected: float | None = DEFAULT_DISCONNECTED_TIMEOUT,
) -> bool | None:
    """Ask each receiver of `entries` (the rendezvous, in rank order) whether it took
    `simulation_id`; True if every one said accepted, None if they cannot be asked
    (`entries` name other `endpoints`, or a receiver names no follow socket), False if
    one did not say within `timeout` seconds (the caller warns), or `stop` was set.
    Malformed replies are counted in `rejected` by reason and ignored. With `trusted`,
    a refusal whose reason it does not trust is taken as unknown (asked again).

    Raises:
        SimulationRefused: a receiver refused the simulation's HELLO.
    """
    follow = [e.get("follow_endpoint") for e in entries]
    if [str(e.get("endpoint")) for e in entries] != list(endpoints) or not all(follow):
        return None  # (another run's rendezvous, or receivers without a follow socket)
    deadline = time.monotonic() + timeout
    context = zmq.Context()
    try:
        for rank, (entry, endpoint) in enumerate(zip(entries, follow, strict=True)):
            reply = _ask(context, str(endpoint), entry, simulation_id, rank, len(entries),
                         deadline, rejected, trusted, stop, disconnected)  # fmt: skip
            if reply is None:
                return False
            if reply.status == protocol.ADMISSION_REFUSED:
                raise SimulationRefused(
                    f"simulation {simulation_id}: the trainer's receiver {rank} "
                    f"({entry['endpoint']}) refused it, and dropped everything it sent: "
                    f"{reason_with_fix(reply.reason)}"
                )
    finally:
        context.term()
    return True


def reason_with_fix(reason: str) -> str:
    """The receiver's reason, and what to do if it does not say it."""
    if "declares other fields" in reason:
        return (
            f"{reason}. Run it again declaring the study's fields (the same names, "
            f"dtypes and shapes, e.g. the trainer's grid size)"
        )
    return reason


def _ask(
    context: zmq.Context,
    endpoint: str,
    entry: dict[str, Any],
    simulation_id: int,
    rank: int,
    world: int,
    deadline: float,
    rejected: Counter[str],
    trusted: Callable[[str], bool] | None = None,
    stop: threading.Event | None = None,
    disconnected: float | None = DEFAULT_DISCONNECTED_TIMEOUT,
) -> AdmissionReply | None:
    """Receiver `rank`'s decided ADMISSION (accepted, or refused for a reason `trusted`
    trusts), asking again while it says unknown; None at `deadline`, or once `stop` is
    set."""
    sock = control_dealer(context, entry, disconnected)  # (its connect: the tuning's bound)
    try:
        sock.connect(endpoint)
        pause = 0.01
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            request_id = next(_request_ids)
            sock.send(protocol.encode_admission_query(simulation_id, request_id))
            reply = _reply(sock, simulation_id, request_id, rank, world, deadline, rejected,
                           stop)  # fmt: skip
            if reply is not None and _decided(reply, trusted):
                return reply
            if reply is not None:  # (its HELLO not processed yet: ask again, later)
                wait = min(pause, max(deadline - time.monotonic(), 0))
                if stop is None:
                    time.sleep(wait)
                elif stop.wait(wait):
                    return None
                pause = min(pause * 2, 0.5)
        return None
    finally:
        sock.close(linger=0)


def _decided(reply: AdmissionReply, trusted: Callable[[str], bool] | None) -> bool:
    if reply.status == protocol.ADMISSION_REFUSED:
        return trusted is None or trusted(reply.reason)
    return reply.status != protocol.ADMISSION_UNKNOWN


def _reply(
    sock: zmq.Socket,
    simulation_id: int,
    request_id: int,
    rank: int,
    world: int,
    deadline: float,
    rejected: Counter[str],
    stop: threading.Event | None = None,
) -> AdmissionReply | None:
    """The valid ADMISSION answering `request_id`, or None at `deadline` (or within
    `STOP_SLICE` seconds of `stop` being set)."""
    while (left := deadline - time.monotonic()) > 0:
        if stop is not None:  # (polled in slices: a stopped watch ends soon)
            if stop.is_set():
                return None
            left = min(left, STOP_SLICE)
        if not sock.poll(int(left * 1000) + 1):
            if stop is not None:
                continue
            return None
        frames = sock.recv_multipart()
        try:
            if len(frames) != 1:
                raise ProtocolError("unexpected_frame", f"{len(frames)} frames, expected 1")
            reply = protocol.decode_admission(frames[0])
            if (reply.simulation_id, reply.request_id) != (simulation_id, request_id):
                raise ProtocolError("bad_request_id", "a reply to another query")
            if (reply.rank, reply.world_size) != (rank, world):
                raise ProtocolError("bad_rank", f"rank {reply.rank} of {reply.world_size}")
        except ProtocolError as exc:
            rejected[exc.reason] += 1
            continue
        return reply
    return None
