"""The receiver: one per training rank, from a ZeroMQ PULL socket to the buffer.

Who ingests (the reader's pumps, or the receiver's thread when they stop) and how
requests from other threads reach the ingester: :mod:`.ingest_loop`, the base class. The
socket, its options, its bind and its rendezvous file: :mod:`.receiver_socket`.

The data path per message, from the socket to `Ingest`: :mod:`.data_path`.

Decisions (the logic is in :mod:`.ingest`, reassembly in :mod:`.assembly`):

* DATA or BYE before any HELLO of its simulation is rejected (reason ``no_hello``), not
  buffered: ZeroMQ keeps each connection's order and every client rank sends its HELLO
  before its data on the same socket, so this happens only with a broken client or
  one whose HELLO was itself rejected. A simulation known from a loaded checkpoint
  needs no new HELLO. DATA of rank r is accepted once any rank's HELLO arrived.
* Extra frames after an INLINE DATA, a HELLO or a BYE are not looked for (that saves
  a ``getsockopt`` per message); such a frame is read as a message of its own and
  rejected, and only that sender's own messages can be affected.
* In-progress samples are bounded by ``max_pending`` samples and ``max_pending_bytes``
  (each reserves its full size). Past a bound the oldest is dropped (counted as
  ``incomplete_dropped``); its step counts as done for finishing the
  simulation, so the stream can still end, and is accepted if re-sent later.
* A simulation has finished when all its client ranks said BYE (``steps_sent``: the
  largest of their counts of steps sent to this receiver) and that many distinct
  steps are completed here, whatever their numbering. A simulation that died without
  BYE never finishes here: the launcher restarts it (it re-sends everything;
  duplicates are dropped) or gives up and calls ``finish``.
* End of stream: once ``expected_simulations`` have finished, or after ``finish()``,
  the buffer is closed (every complete sample was put before). The thread then keeps
  reading and discarding (``ignored_after_end``) so that late clients do not block,
  until ``stop()``.
* One schema per study (`fields`, as `StreamSource` sets it): the fields every
  simulation must declare are `fields`, or with ``fields="first"`` the first accepted
  HELLO's. A HELLO of a new simulation declaring others is refused
  (``schema_mismatch``, logged with the difference); `refused()` lists it, so that the
  launcher kills that simulation and counts a failed attempt.
* One parameter order per study: every sample's ``parameters`` vector is in the order
  of `parameters` (a `Study`'s sampler's names), whatever order a solver lists them in
  (`stream.schema`).
* One run per receiver: with a `run_id` (a trainer's), the receiver publishes it in
  its rendezvous file and refuses a HELLO carrying another (``wrong_run``, logged with
  both ids): a simulation of another trainer that reached this endpoint (a stale
  rendezvous, a reused port). A HELLO without a run id (an older client) is accepted.
  The client cannot be told over PUSH/PULL: its DATA are then dropped as ``no_hello``
  (the protocol's DATA carry no run id: a simulation id that this run uses too is not
  told apart; the client's own check against the rendezvous and the output_dir lock
  are what keep other runs away, see `melissa_trainer.trainer.output_lock`).
* Samples holding NaN or Inf in a float field are refused (counted, logged, their
  step recorded as received), trained on, or fail their simulation, per
  `ReceiverConfig.nonfinite` (:mod:`.nonfinite`); a field whose every part came with
  the protocol's FINITE flag was checked by its sender, and is not checked again.
* No silent hang: with `stall_timeout`, a receiver whose socket stayed empty that long
  while the stream has not ended fails (`check` raises, naming the simulations it
  waits for), unless `excuse_silence`'s callable explains the silence (a `Study`'s
  launcher: its simulations are still starting up). Time blocked on a full buffer is
  not idle time.
* Logging: the first rejected message and the first dropped incomplete sample of
  each reason are logged in full, the others in one summary line at most every 30 s
  and at the end of the stream or `stop` (:mod:`.log_summary`); telemetry counts
  every one.
* Checkpoints (``state_dict``) hold the dedup record, not the in-progress parts (a
  restarted simulation re-sends them). The record also lists the last keys put, so
  that a resume can accept again the samples put after the buffer's snapshot.
* Scale: a finished simulation's ledger is archived (one integer: its step count;
  :mod:`.archive`) once its keys have left that list, so the ledgers kept are those of
  the running simulations and the last ones to finish, whatever the study's size.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import replace
from functools import partial
from typing import Any

import zmq

from melissa_trainer.buffers import Buffer
from melissa_trainer.common.migrations import upgrade
from melissa_trainer.sources.ingest_transform import IngestTransform
from melissa_trainer.stream import connection_lines, study_stops
from melissa_trainer.stream import connections as conn
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.data_path import DataPath
from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.follow_answers import admission_of, receipt_of
from melissa_trainer.stream.follow_server import FOLLOW_KINDS, FollowServer, follow_bind
from melissa_trainer.stream.handshakes import log_bound
from melissa_trainer.stream.ingest_record import held_now
from melissa_trainer.stream.liveness import HEADER_ALLOWANCE
from melissa_trainer.stream.receiver_address import curve_keys
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning
from melissa_trainer.stream.receiver_queries import ReceiverQueries
from melissa_trainer.stream.receiver_socket import bind_and_publish, pull_socket
from melissa_trainer.stream.stop_record import StopReason, build_record, reason_of
from melissa_trainer.stream.watchdog import SilenceExcuse
from melissa_trainer.wire.routing import kept_of

__all__ = ["Receiver"]

logger = logging.getLogger(__name__)


class Receiver(DataPath, ReceiverQueries):
    """Receives one training rank's share of the stream into `buffer` (see module doc).

    Args:
        buffer: where complete samples go; closed at end of stream or on failure.
        rank, world_size: this training rank and the number of receivers; this one gets
            the time steps its simulations' routing sends it (`wire.routing`).
        config: what the user sets (`ReceiverConfig`: expected simulations, endpoint,
            schema, bounds, CURVE keys); default ``ReceiverConfig()``.
        tuning: timing (`ReceiverTuning`); default ``ReceiverTuning()``.
        ingest_transform: applied once to each sample (or BATCH's block) before it is
            put, by whichever thread ingests (see `Feeder`); its failure fails the
            receiver (`check` and `pump` raise `SourceError` naming it).

    Peers (:mod:`.liveness`): a connection that does not complete the ZMTP handshake
    in 30 s is dropped, and one whose host stops answering (crash, partition) in about
    2 minutes (TCP keepalive); its partial message is freed. A live peer that stalls in
    the middle of a message keeps it (one frame, at most ``max_message_bytes``) until
    it goes on or dies: ZMTP heartbeats would drop it, but libzmq's also drop (and
    lose the messages of) connections that back-pressure holds, or abort the process.
    Memory that connections hold: ``rcvhwm`` + 2 messages each (see there).

    Thread-safety: `start` and `load_state_dict` are called once, from one thread;
    `pump` (see `IngestLoop`) from the buffer's reader; `check`, `finish`, `stop`,
    `telemetry`, `activity`, `backpressured`, `state_dict` and `finished_simulations`
    from any thread. `stop` blocks up to `tuning.stop_timeout`, `state_dict` about
    `tuning.poll_interval`; the others do not block.
    """

    def __init__(
        self,
        buffer: Buffer,
        rank: int = 0,
        world_size: int = 1,
        config: ReceiverConfig | None = None,
        tuning: ReceiverTuning | None = None,
        ingest_transform: IngestTransform | None = None,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} out of range for world_size {world_size}")
        config = ReceiverConfig() if config is None else config
        tuning = ReceiverTuning() if tuning is None else tuning
        super().__init__(buffer, rank, world_size, config, tuning, ingest_transform)
        self.config, self.tuning = config, tuning
        self._bind, self._rendezvous = config.bind, config.rendezvous_dir
        self._max_bytes, self._rcvhwm = config.max_message_bytes, config.rcvhwm
        self._advertise, self._recycle = config.advertise_host, config.recycle_frames
        self._curve = curve_keys(config.curve_secret_key, config.curve_public_key)
        self._decode = DataDecoder(self._max_bytes)
        self._loaded: dict[str, Any] | None = None
        self._context: zmq.Context | None = None
        self._endpoint: str | None = None
        self._watch: conn.ConnectionWatch | None = None
        self._follow: FollowServer | None = None
        self._stop_reason: StopReason | None = None
        #: Whether a restart by the launcher resumes this run (`Source.note_restarts_resume`):
        #: if not, a record of ``error`` says no restart left, whatever torchrun's count
        self.restarts_resume = True
        self._marked = False  # (the stop record written: `stop` is idempotent)

    # -- control (any thread) ------------------------------------------------------------

    @property
    def endpoint(self) -> str | None:
        """The endpoint clients connect to (None before `start`)."""
        return self._endpoint

    @property
    def curve_public_key(self) -> str | None:
        """The Z85 CURVE server public key clients need, or None without CURVE."""
        return None if self._curve is None else self._curve[1].decode("ascii")

    @property
    def ended(self) -> bool:
        """True once the stream has ended here (the buffer was closed)."""
        return self._ended

    def start(self) -> None:
        """Bind, publish the endpoint, start the thread (returns at once)."""
        if self._thread is not None:
            raise RuntimeError("Receiver.start() was called twice")
        if self._loaded is not None:
            self.ingest.load_state_dict(self._loaded, self._buffer.stats().put)
        self._context = zmq.Context()
        sock = self._socket = pull_socket(
            self._context, self._rcvhwm, self._max_bytes, self._poll, self._curve
        )
        extra: dict[str, Any] = kept_of(self.ingest.sims, self.ingest.shifted)  # (loaded)
        if self._curve is not None:
            extra["curve_public_key"] = self.curve_public_key
        if self.config.run_id is not None:
            extra["run_id"] = self.config.run_id
        try:  # (an OSError naming what to do: `receiver_socket.bind_error`)
            if self._rendezvous is not None:
                # what a running simulation of a restarted trainer, or a rerun, asks
                # (`follow_server`):
                # only with a rendezvous, the one way a client finds the restarted trainer
                self._follow = FollowServer(
                    partial(held_now, self.ingest),  # (live: what it would drop as duplicates)
                    *(self._rank, self._world),
                    follow_bind(self._bind, self._rank),
                    self._advertise,
                    self._curve,
                    # (what a closing client asks: taken or refused, its BYE in? `client.confirm`)
                    partial(admission_of, self.ingest),
                    partial(receipt_of, self.ingest, self.config.run_id),
                    self.ingest.rerun_held.__setitem__,  # (logged at its finish)
                )
                extra["follow_endpoint"] = self._follow.start()
                extra["follow_kinds"] = list(FOLLOW_KINDS)
            self._endpoint = bind_and_publish(
                sock, self._bind, self._advertise, self._rank, self._world, self._rendezvous, extra
            )
        except BaseException:
            if self._follow is not None:
                self._follow.stop()
                self._follow = None
            self._close_socket()
            raise
        self._watch = conn.ConnectionWatch(
            sock,
            self._max_bytes + HEADER_ALLOWANCE,
            self._lost,
            lambda: self._ended or self._stopping,
            partial(study_stops.study_stops_announced, self._rendezvous, self.config.run_id),
            f" (receiver of rank {self._rank})" if self._world > 1 else "",  # (whose words)
            self.heard_kills,  # (rank 0's word of its failures for NaN: `nonfinite_kills`)
        )
        where, key = f"receiver of rank {self._rank}", self.curve_public_key  # (and its key)
        log_bound(logger, where, self._endpoint, key, "MELISSA_TRAINER_KEY")
        self._thread = threading.Thread(
            target=self._run, name=f"melissa-receiver-{self._rank}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (bounded wait), close the socket and context; idempotent.

        The rendezvous file is marked stopped (`endpoints.mark_stopped`), not removed:
        a client that reads it then waits for the next trainer (one resumed from a
        checkpoint publishes again) instead of dialing an endpoint nobody listens on,
        and a running one that follows its trainer (`melissa_trainer.client.follow`)
        knows that it is down. The next run overwrites it (and a next run on fewer ranks
        removes those of the ranks it lacks: `write_rendezvous`). The ingest stops first,
        then the file is marked with the stop record (`stop_record`: the receipts of the
        BYEs ingested, and why it stopped), then the follow socket answers what it holds
        and closes: a closing client that finds no follow socket finds the record.
        """
        self._request_stop()
        stuck = False
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(self._stop_timeout)
            stuck = self._thread.is_alive()
        if self._rendezvous is not None and self._endpoint is not None and not self._marked:
            self._marked = True
            reason = reason_of(self._error, self._stop_reason)
            if reason.code == "error" and not self.restarts_resume:
                reason = replace(reason, restarts_left=0)
            # (the steps held are exact only if every step marked reached the buffer: none
            # lost, none in flight in a put the stop interrupted, none left in the feeder's
            # overflow (a pump's, the buffer full: `_end` counts them lost, a stop without
            # an end does not), the ingester stopped)
            left = bool(self._feeder.overflow)
            held = not (stuck or self.puts_lost or left or self.ingest.in_flight)
            record = build_record(self.ingest, self.config.run_id, reason, held)
            mark_stopped(self._rendezvous, self._rank, self._endpoint, record)
        if self._follow is not None:
            self._follow.stop()
            self._follow = None
        if stuck:
            logger.warning("receiver thread of rank %d did not stop", self._rank)
            return
        self._close_socket()

    def note_stop(self, reason: StopReason) -> None:
        """Why its owner stops it (`Source.note_stop`), before `stop`: what its stop
        record says, unless the receiver failed (its own error says why). Any thread."""
        self._stop_reason = reason

    def study_stops(self, announce: bool = False) -> None:
        """The study is about to kill its simulations (`Study.stop`, before its launcher
        does; any thread): their connections that close without a BYE from now on are
        counted and summarised in one line at `stop`, not warned of one by one as lost
        (`ConnectionWatch.study_stops`). With `announce` (rank 0, whose launcher kills),
        every rank's receiver is told through the rendezvous directory (`stream.connections`)."""
        watch = self._watch  # (read once: `stop` clears it)
        if watch is not None:
            watch.study_stops()
        if announce:
            study_stops.announce_study_stops(self._rendezvous, self.config.run_id)

    def follow_rejected(self) -> dict[str, int]:
        """Malformed queries its follow socket dropped, by reason (`follow_server`;
        empty without a rendezvous). Any thread."""
        return {} if self._follow is None else dict(self._follow.rejected)

    def excuse_silence(self, excuse: SilenceExcuse | None) -> None:
        """What may explain a silence past `stall_timeout` (None: nothing, a stall;
        see `melissa_trainer.stream.watchdog`). Any thread; takes effect at the next
        empty poll."""
        self._idle.excuse = excuse

    # -- checkpoint ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The dedup record, JSON-serializable (bit arrays as base64).

        Samples being reassembled are not part of it: a restarted simulation re-sends
        them. While the thread runs, the snapshot is taken by the ingester between two
        messages (`IngestLoop.snapshot`), so it is consistent without a lock on the data
        path; this call waits about `tuning.poll_interval`.
        """
        if self._thread is None and self._loaded is not None:
            return self._loaded
        return self.snapshot()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a `state_dict()`; before `start` (applied there, against the buffer)."""
        if self._thread is not None:
            raise RuntimeError("load_state_dict() must be called before start()")
        state = upgrade("receiver", state)  # (raises on an unknown version)
        if (state["rank"], state["world_size"]) != (self._rank, self._world):
            raise ValueError(
                f"receiver state of rank {state['rank']} of {state['world_size']} cannot be "
                f"loaded into rank {self._rank} of {self._world}"
            )
        self._loaded = json.loads(json.dumps(state))  # a private copy, and JSON-checked

    def _lost(self) -> None:
        """A connection closed before its BYE (the ingester, in `ConnectionWatch.settle`,
        or `stop`'s thread after the receiver's: one writer at a time)."""
        self.ingest.connections_lost += 1

    def _close_socket(self) -> None:
        if self._watch is not None:
            # the receiver's thread has ended (or never started): `stop` owns the socket
            self._watch.close(self._socket_empty, partial(connection_lines.fate_in, self.ingest))
            self._watch = None
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        if self._context is not None:
            self._context.term()
            self._context = None
