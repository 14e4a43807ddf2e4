"""`FollowServer`: one receiver's follow socket, which tells a running simulation whose
trainer was restarted which of its time steps the checkpoint resumed from holds
(docs/protocol.md, section 17; the client's side is `melissa_trainer.client.follow`).

PUSH/PULL acknowledges nothing: a simulation streaming to a trainer that was preempted
cannot know which of its steps the checkpoint holds. A receiver knows. So it binds a
ZeroMQ ROUTER beside its PULL socket (same interface, a random port; published as
``follow_endpoint`` in its rendezvous file) and answers each HELD_QUERY (a simulation
id) with a HELD: the bit array of that simulation's steps it holds. The receiver's
answer is read live (`ingest_record.held_now`): the steps its ledger has marked, those
it would drop as duplicates if sent again, so a client skipping them loses nothing and a
rerun within the same trainer (a Slurm requeue, a launcher's restart) skips what its
first run delivered; a step marked while the answer is read may be left out (it comes
again and is dropped). A mapping given instead is a snapshot (the unit tests').

It also answers each ADMISSION_QUERY (section 17a) with an ADMISSION: whether the
receiver took the simulation, refused its HELLO (and why), or has not processed a HELLO
of it yet (`follow_answers.admission_of`, read live from the ingest's ledgers and refusals): what a
closing client asks, so that a simulation refused (another grid, missing parameters)
fails instead of ending as if it had been trained on (`melissa_trainer.client.admission`).

And each RECEIPT_QUERY (section 17b) with a RECEIPT (`follow_answers.receipt_of`, live too): the
admission, whether the asking client rank's BYE has been *ingested* here (so everything
that rank sent this receiver before it has been: messages of one connection are read in
order), the simulation's steps held and its samples refused as non-finite. A closing
client in external mode returns only once every receiver confirms its BYE
(`melissa_trainer.client.confirm`): a BYE that left the client is not yet one the
trainer has. A query naming another run than the receiver's, of a simulation the
receiver holds nothing of, is answered refused (``wrong_run``): that simulation's HELLO
was dropped here, and its client is told so at once, with the fix. An ADMISSION_QUERY names
no run: it is answered refused (``wrong_run``) for an id whose HELLO the ingest refused
as another run's (`IngestState.wrong_runs`, bounded) and holds nothing of. A query it cannot
confirm yet is held, at most `RECEIPT_HOLD` seconds, and answered as soon as it can be
(the BYE ingested), or as things stand when the hold ends or `stop` comes: a trainer
that ends as soon as the last BYE is in has confirmed it before its socket closes.

A malformed query is counted (`rejected`, by reason), logged (the first of each reason
in full, then a summary: `LogSummary`), and dropped unanswered: its sender times out.
Nothing is unpickled; a frame over 1 KiB closes its connection in ZeroMQ's I/O thread
(MAXMSGSIZE).

Thread-safety: `start` and `stop` from one thread; `rejected` and `answered` are read
from any thread (counters: a best-effort read). `stop` waits up to `STOP_TIMEOUT` s.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.stream.follow_answers import Receipt
from melissa_trainer.stream.log_summary import REJECTED, LogSummary
from melissa_trainer.stream.receiver_address import advertised
from melissa_trainer.wire import ProtocolError
from melissa_trainer.wire.layout import RECEIPT_QUERY
from melissa_trainer.wire.receipt import (
    RECEIPT_NO_BYE,
    ReceiptQuery,
    confirms,
    decode_receipt_query,
    encode_receipt,
)

__all__ = [
    "FOLLOW_KINDS",
    "FollowServer",
    "HeldRecord",
    "follow_bind",
]

logger = logging.getLogger(__name__)

#: seconds `stop` waits for the thread
STOP_TIMEOUT = 5.0
_POLL_MS = 100
#: seconds the follow socket may hold a RECEIPT_QUERY it cannot confirm yet before it
#: answers as things stand (the client asks again at once): a BYE ingested meanwhile is
#: confirmed within `_HELD_TICK_MS`, so that a trainer that ends as soon as the last
#: simulation's BYE is in has said so before it stops (and `stop` answers those held)
RECEIPT_HOLD = 0.5
_HELD_TICK_MS = 2
#: the most queries held at once (more are answered at once: a flood of queries costs
#: the follow thread no more than this many receipts per tick)
MAX_HELD = 1024

#: simulation id -> (status, bit count, bit array): what a HELD says of it
HeldRecord = Mapping[int, tuple[int, int, bytes]]
#: the queries a follow socket answers, published in its rendezvous file
#: (``follow_kinds``): a client asks a receiver that lacks RECEIPT_QUERY (an older one)
#: the ADMISSION_QUERY instead
FOLLOW_KINDS = (protocol.HELD_QUERY, protocol.ADMISSION_QUERY, RECEIPT_QUERY)


def follow_bind(receiver: str, rank: int) -> str:
    """The follow socket's bind on the receiver's interface (`receiver`: its bind): the
    same host and a random port; an ipc path gets a suffix; anything else loopback."""
    if receiver.startswith("tcp://"):
        return f"{receiver.rpartition(':')[0]}:*"
    if receiver.startswith("ipc://"):
        return f"{receiver}.follow{rank}"
    return "tcp://127.0.0.1:*"


class FollowServer:
    """Answers HELD_QUERY with HELD from `record` (module docstring).

    Args:
        record: simulation id -> what a HELD says of it, read at each query (the
            receiver's: `ingest_record.held_now`), or a fixed mapping of them (absent: none).
        rank, world_size: the receiver's (every HELD carries them: the client maps
            local steps back to time steps with them).
        bind: where to bind (`follow_bind`); advertise: as the receiver's.
        curve: the receiver's CURVE server keys (secret, public), or None.
        admission: simulation id -> (ADMISSION status, reason), live (`admission_of`
            on the receiver's ingest); None: every ADMISSION says unknown.
        receipt: a RECEIPT_QUERY -> what its RECEIPT says, live (`receipt_of` on the
            receiver's ingest and run id); None: every RECEIPT says unknown, no BYE.
        told: called with (simulation id, steps held) when a HELD says that `record`
            holds steps of it (a rerun skips them: `IngestState.rerun_held`, logged at
            its finish); None: nothing.
    """

    def __init__(
        self,
        record: HeldRecord | Callable[[int], tuple[int, int, bytes]],
        rank: int,
        world_size: int,
        bind: str,
        advertise: str | None = None,
        curve: tuple[bytes, bytes] | None = None,
        admission: Callable[[int], tuple[int, str]] | None = None,
        receipt: Callable[[ReceiptQuery], Receipt] | None = None,
        told: Callable[[int, int], None] | None = None,
    ) -> None:
        self._record = record if callable(record) else dict(record)
        self._told = told
        self._admission, self._receipt = admission, receipt
        self._rank, self._world = rank, world_size
        self._bind, self._advertise, self._curve = bind, advertise, curve
        self._stop = threading.Event()
        self._context: zmq.Context | None = None
        self._router: zmq.Socket | None = None
        self._thread: threading.Thread | None = None
        self._summary = LogSummary(logger, f"follow socket of rank {rank}")
        #: RECEIPT_QUERYs held until they can be confirmed: (identity, query, deadline)
        self._held: list[tuple[bytes, ReceiptQuery, float]] = []
        #: malformed queries dropped, by reason
        self.rejected: collections.Counter[str] = collections.Counter()
        self.answered = 0
        self.endpoint: str | None = None

    def start(self) -> str:
        """Bind and start the thread; returns the endpoint clients dial."""
        ctx = self._context = zmq.Context()
        router = self._router = ctx.socket(zmq.ROUTER)
        # (a query is 24 bytes; ZeroMQ counts more than its frame against the bound)
        router.setsockopt(zmq.MAXMSGSIZE, 1024)  # (a RECEIPT_QUERY: 94 bytes at most)
        router.setsockopt(zmq.LINGER, 1000)  # (the last answers leave on `stop`)
        router.setsockopt(zmq.RCVTIMEO, _POLL_MS)
        if self._curve is not None:
            router.curve_server = True
            router.curve_secretkey, router.curve_publickey = self._curve
        try:
            router.bind(self._bind)
            self.endpoint = advertised(router.getsockopt_string(zmq.LAST_ENDPOINT), self._advertise)
        except BaseException:
            self._close()
            raise
        self._thread = threading.Thread(
            target=self._run, name=f"melissa-follow-{self._rank}", daemon=True
        )
        self._thread.start()
        return self.endpoint

    def stop(self) -> None:
        """Stop the thread and close the socket; idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT)
            if self._thread.is_alive():
                logger.warning("follow thread of rank %d did not stop", self._rank)
                return
        self._summary.flush()
        self._close()

    def answer(self, query: bytes) -> bytes:
        """The HELD answering `query` (a HELD_QUERY frame).

        Raises:
            ProtocolError: a malformed query.
        """
        simulation_id, request_id = protocol.decode_held_query(query)
        record = self._record
        status, nbits, bits = (
            record(simulation_id)
            if callable(record)
            else record.get(simulation_id, (protocol.HELD_NONE, 0, b""))
        )
        if status == protocol.HELD_STEPS and self._told is not None:  # (bits past nbits: 0)
            self._told(simulation_id, int.from_bytes(bits, "little").bit_count())
        return protocol.encode_held(
            simulation_id, request_id, self._rank, self._world, status, nbits, bits
        )

    def answer_admission(self, query: bytes) -> bytes:
        """The ADMISSION answering `query` (an ADMISSION_QUERY frame).

        Raises:
            ProtocolError: a malformed query.
        """
        simulation_id, request_id = protocol.decode_admission_query(query)
        status, reason = (
            (protocol.ADMISSION_UNKNOWN, "")
            if self._admission is None
            else self._admission(simulation_id)
        )
        return protocol.encode_admission(
            simulation_id, request_id, self._rank, self._world, status, reason
        )

    def answer_receipt(self, query: bytes) -> bytes:
        """The RECEIPT answering `query` (a RECEIPT_QUERY frame).

        Raises:
            ProtocolError: a malformed query.
        """
        return self._encode_receipt(decode_receipt_query(query))

    def _receipt_now(self, asked: ReceiptQuery) -> Receipt:
        if self._receipt is None:
            return protocol.ADMISSION_UNKNOWN, RECEIPT_NO_BYE, "", 0, 0, 0
        return self._receipt(asked)

    def _encode_receipt(self, asked: ReceiptQuery, said: Receipt | None = None) -> bytes:
        said = self._receipt_now(asked) if said is None else said
        return encode_receipt(asked.simulation_id, asked.request_id, self._rank, self._world, *said)

    def _hold_or_answer(self, identity: bytes, query: bytes) -> bytes | None:
        """The RECEIPT answering `query` if it decides it (or the receipt cannot be
        read here, or `MAX_HELD` are held), else None: the query is held."""
        asked = decode_receipt_query(query)
        said = self._receipt_now(asked)
        decided = confirms(said[0], said[1], said[4], asked.bye_steps) is not None
        if self._receipt is None or decided or len(self._held) >= MAX_HELD:
            return self._encode_receipt(asked, said)
        self._held.append((identity, asked, time.monotonic() + RECEIPT_HOLD))
        return None

    def _answer_held(self, router: zmq.Socket, last: bool = False) -> None:
        """Answer each held query that is decided now, past its hold, or (`last`) all."""
        now, kept = time.monotonic(), []
        for identity, asked, deadline in self._held:
            said = self._receipt_now(asked)
            decided = confirms(said[0], said[1], said[4], asked.bye_steps) is not None
            if decided or last or now >= deadline:
                router.send_multipart([identity, self._encode_receipt(asked, said)])
                self.answered += 1
            else:
                kept.append((identity, asked, deadline))
        self._held = kept

    def _run(self) -> None:
        router = self._router
        assert router is not None
        while not self._stop.is_set():
            if self._held:
                self._answer_held(router)
            try:
                if not router.poll(_HELD_TICK_MS if self._held else _POLL_MS):
                    raise zmq.Again
                frames = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                self._summary.tick()
                continue
            identity, parts = frames[0], frames[1:]
            sim = protocol.peek_simulation_id(parts[0]) if parts else None
            try:
                if len(parts) != 1:
                    raise ProtocolError("unexpected_frame", f"{len(parts)} frames, expected 1")
                kind = parts[0][protocol.KIND_AT] if len(parts[0]) > protocol.KIND_AT else 0
                if kind == protocol.ADMISSION_QUERY:
                    reply = self.answer_admission(parts[0])
                elif kind == RECEIPT_QUERY:
                    held = self._hold_or_answer(identity, parts[0])
                    if held is None:
                        continue
                    reply = held
                else:
                    reply = self.answer(parts[0])
            except ProtocolError as exc:
                self.rejected[exc.reason] += 1
                self._summary.event(
                    REJECTED, exc.reason, sim, f"follow socket of rank {self._rank}: {exc}"
                )
                continue
            router.send_multipart([identity, reply])
            self.answered += 1
        self._answer_held(router, last=True)  # (the last word, before the socket closes)

    def _close(self) -> None:
        if self._router is not None:
            self._router.close()
            self._router = None
        if self._context is not None:
            self._context.term()
            self._context = None
