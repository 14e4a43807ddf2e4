"""Who ingests a receiver's socket, and how requests from other threads reach it.

The buffer's reader (the training thread) calls `IngestLoop.pump` (through
`StreamSource.wait_for`) before it takes data, and ingests what has arrived between
steps; a daemon thread (`_run`) does the same work whenever no pump came for
`takeover` seconds (validation, checkpoints, a caller that never pumps). One lock
decides who holds the socket, so there is always exactly one ingester, and the thread
does not compete with training for the GIL while pumps come. A pump never blocks on a
full buffer (it is the one thread that could make room: `Feeder` keeps what does not
fit); the thread does, which is the back-pressure that reaches the clients.

Requests from other threads (finish, stop, a checkpoint's snapshot) are flags that the
ingester reads between messages: one `_attention` flag per message, so the data path
pays one attribute read for all of them. A snapshot is taken by the ingester itself
(`snapshot`), consistent without a lock on the data path.

`IngestLoop` is the base of `data_path.DataPath` (the per-message data path, `_serve`),
itself the base of `Receiver`, which binds the socket; the split is by concept, the
object is one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import zmq

from melissa_trainer.buffers import Buffer
from melissa_trainer.common.words import plural
from melissa_trainer.sources.ingest_transform import IngestTransform
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.feeder import Feeder
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.ingested import Draining
from melissa_trainer.stream.nonfinite_ranks import NonfiniteRanks
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning
from melissa_trainer.stream.receiver_failure import failure_cause, failure_words, log_failure
from melissa_trainer.stream.study_end import StudyEndCheck
from melissa_trainer.stream.watchdog import IdleClock

__all__ = ["IngestLoop"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages


class _Stopped(Exception):
    """Raised in the ingester on a stop request: unwinds the thread."""


class IngestLoop(ABC):
    """The ingester of a receiver: its pumps, its thread, and the requests they serve.

    Subclasses provide `_serve` (receive and ingest messages, holding `_lock`: blocking
    until a pump comes when `pump` is False, else within `pump_budget`, waiting up to
    `wait` for a first message) and set `_socket` before `_run` starts.

    Thread-safety: `pump` from the buffer's reader; `check`, `finish` and `snapshot`
    from any thread (`snapshot` waits for the ingester, the others do not block).
    """

    def __init__(
        self,
        buffer: Buffer,
        rank: int,
        world_size: int,
        config: ReceiverConfig,
        tuning: ReceiverTuning,
        ingest_transform: IngestTransform | None = None,
    ) -> None:
        self._buffer, self._rank, self._world = buffer, rank, world_size
        self._idle = IdleClock(config.stall_timeout)
        self._poll, self._stop_timeout = tuning.poll_interval, tuning.stop_timeout
        self._takeover, self._pump_budget = tuning.takeover, tuning.pump_budget
        self._feeder = Feeder(
            buffer,
            tuning.put_timeout,
            self._serve_requests,
            self._closed_under_us,
            ingest_transform,  # (applied by the ingester, once per sample: `Feeder`)
        )
        self.ingest = Ingest(
            rank,
            world_size,
            put=self._feeder.put,
            end=self._end,
            put_many=self._feeder.put_many,
            expected=config.expected_simulations,
            max_field_bytes=config.max_message_bytes,
            max_pending=config.max_pending,
            max_pending_bytes=config.max_pending_bytes,
            max_time_step=config.max_time_step,
            # > the puts between two snapshots (the largest message's samples are added
            # to it as they come: `IngestState.keep_recent`)
            recent_size=buffer.capacity + 16,
            schema=config.schema,
            one_schema=config.fields is not None,
            parameters=config.parameters,
            run_id=config.run_id,
            nonfinite=config.nonfinite,
        )
        # (receipts count a batch's steps as they reach the buffer, not at decode)
        self.ingest.draining = Draining(lambda: self._feeder.put_count)

        #: the word with the other ranks' receivers about failures for NaN or Inf
        #: (`nonfinite_ranks`: rank 0's said to the others, theirs handed to rank 0)
        self.nonfinite_ranks = NonfiniteRanks(config, rank, world_size, self.ingest)
        #: rank 0's word that the study has ended (a STUDY_END), judged when idle
        self.study_end = StudyEndCheck(rank, tuning.study_end_grace, self.ingest.nonfinite)
        self._lock = threading.Lock()  # who ingests: the thread, or a pump
        self._last_pump = -math.inf
        self._socket: zmq.Socket | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        # Requests from other threads, read by the ingester between messages:
        self._attention = False  # any request pending (the one flag read per message)
        self._stopping = False
        #: a sample marked that never reached the buffer (a put refused by a closed buffer,
        #: samples kept for later dropped at the end): the stop record's steps held would
        #: over-count, so it writes none (`stop_record.build_record`'s `held`)
        self.puts_lost = False
        #: set by `_request_stop`: the thread, idle while pumps come, waits on it rather
        #: than sleeping, so that `stop` does not wait out its nap (up to `poll_interval`)
        self._wake = threading.Event()
        self._finish: str | None = None  # "wait" or "now"
        self._snapshot_wanted = False
        self._snapshot: dict[str, Any] | None = None
        self._snapshot_ready = threading.Event()
        self._snapshot_mutex = threading.Lock()  # one snapshot() caller at a time
        self._ended = False
        #: the end-of-stream list of twins is due (`_tell_twins`)
        self._twins_due = False

    @abstractmethod
    def _serve(self, pump: bool, wait: float = 0.0) -> None:
        """Receive and ingest messages, holding `_lock` (the subclass's data path)."""

    # -- requests (any thread) -------------------------------------------------------------

    def check(self) -> None:
        """Raise `SourceError` if the receiver thread failed; cheap."""
        error = self._error
        if error is not None:
            raise SourceError(
                f"the stream receiver of rank {self._rank} failed: {failure_words(error)}"
            ) from failure_cause(error)

    def report_refusals_to_launcher(self) -> None:
        """A launcher reads `refused` (a `Study` calls this on rank 0 before it starts
        the simulations): a simulation that sends non-finite data under
        ``nonfinite="fail"`` is then listed there for the launcher to fail, instead of
        failing the stream (see `melissa_trainer.stream.nonfinite`), and, under several
        ranks, said to the other ranks' receivers (`nonfinite_kills`), whose own such
        failures are handed here and listed likewise (`nonfinite_handoff`)."""
        self.nonfinite_ranks.report_to_launcher()

    @property
    def heard_kills(self) -> Callable[[int], int] | None:
        """On a rank other than 0, rank 0's count of failures for NaN or Inf of a
        simulation (`NonfiniteKills.failures`, for its `ConnectionWatch`); None on rank
        0 (its own ledger tells) and where no word is kept (`nonfinite_kills`)."""
        return self.nonfinite_ranks.heard_kills

    def finish(self, wait: bool = True) -> None:
        """No more simulations will come. With `wait`, the stream ends once every
        simulation that said HELLO has finished and no message is waiting; otherwise at
        once (samples still being assembled are dropped)."""
        self._finish = "wait" if wait and self._finish != "now" else "now"
        self._attention = True

    def snapshot(self) -> dict[str, Any]:
        """The ingest state (`Ingest.state_dict`), taken by the ingester between two messages
        (or while it waits in a blocked put) while the thread runs: consistent without a
        lock on the data path, even while the thread holds the ingest lock, blocked on a
        full buffer that only this caller may empty. Waits for it."""
        with self._snapshot_mutex:
            thread = self._thread
            if thread is not None and thread.is_alive():
                self._snapshot_ready.clear()
                self._snapshot_wanted = self._attention = True
                while thread.is_alive():
                    if self._snapshot_ready.wait(0.05):
                        snapshot, self._snapshot = self._snapshot, None
                        assert snapshot is not None
                        return snapshot
                self._snapshot_wanted = False
            return self.ingest.state_dict()  # the thread is not running: nothing changes

    # -- the ingester ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            with self._lock:
                self.ingest.check_expected()
            while True:
                if self._attention:
                    with self._lock:
                        self._on_request()
                if time.monotonic() - self._last_pump < self._takeover:
                    # pumps do the work; `stop` wakes this wait (a sleep would hold `stop`
                    # up to `poll_interval`, at the end of every training run)
                    self._wake.wait(min(self._takeover / 4, self._poll))
                    continue
                with self._lock:
                    self._serve(pump=False)
        except _Stopped:
            pass
        except BaseException as exc:  # surfaced by check() in the training loop
            log_failure(self._rank, exc)
            self._error = exc
            self._buffer.close()
        finally:
            self._flush_log()
            if self._socket is not None:
                self._socket.close(linger=0)

    def pump(self, wait: float = 0.0) -> bool:
        """Receive what has arrived, in the calling thread: the training thread calls
        this before it takes data, so that ingest runs between steps instead of in a
        second thread contending for the GIL during them.

        While calls keep coming (less than `takeover` seconds apart) the receiver thread
        stays idle; when they stop (validation, a checkpoint, a long step) it takes over.
        Returns when nothing is waiting, after `pump_budget` seconds, or when the buffer
        is full (what does not fit is put first next time). With `wait` > 0 (seconds)
        and nothing waiting, it first waits up to about `wait` seconds for a message (a
        reader short of data waits on the network rather than on its buffer, so that
        what arrives is ingested at once, not after its wait), and for the thread to
        hand the socket over if it is serving; with `wait` 0 it returns at once then.
        Samples are ingested exactly as by the thread.

        Returns:
            True if this call served the socket; False if it could not (not started,
            ended, stopped, failed, or the thread kept ingesting).

        Raises:
            SourceError: ingest failed (the receiver is then stopped, as on a thread failure).
        """
        if self._thread is None or self._ended or self._stopping or self._error is not None:
            return False
        self._last_pump = time.monotonic()
        if not self._lock.acquire(False):
            # The thread, serving, sees the pump within one message or `poll_interval`
            # and hands over: a caller that may wait waits for that, then serves what is
            # waiting without waiting more (the thread may have put what it needs).
            if not (wait > 0 and self._lock.acquire(timeout=wait)):
                return False
            wait = 0.0
        if self._stopping or self._socket is None:  # stopped since the check above
            self._lock.release()
            return False
        self._feeder.pumping = True
        try:
            self._hear_handoffs()  # (also while the buffer is full: no idle poll comes)
            self._serve(pump=True, wait=wait)  # (no wait while samples wait for room)
        except (KeyboardInterrupt, SystemExit):
            raise  # Ctrl-C or an exit in this thread: the caller's to handle, not a failure
        except BaseException as exc:
            log_failure(self._rank, exc)
            self._error = exc
            self._request_stop()
            self._buffer.close()
            raise SourceError(
                f"the stream receiver of rank {self._rank} failed: {failure_words(exc)}"
            ) from failure_cause(exc)
        finally:
            self._feeder.pumping = False
            self._lock.release()
        return True

    def _request_stop(self) -> None:
        """Ask the ingester to stop (any thread): read between messages, and wakes the
        thread's idle wait at once."""
        self._stopping = self._attention = True
        self._wake.set()

    def _closed_under_us(self) -> bool:
        self.puts_lost = True  # (the sample being put was marked: `puts_lost`)
        if not self._ended:
            self._end("the buffer was closed by its reader")
        return False

    def _serve_requests(self) -> None:
        """Between the tries of a put blocked on a full buffer (`Feeder`): the requests,
        and other ranks' hand-offs (no empty poll comes while rank 0 is held)."""
        self._hear_handoffs()
        if self._attention:
            self._on_request()

    def _on_request(self) -> None:
        self._attention = False  # cleared first: a request made from now on sets it again
        if self._stopping:
            raise _Stopped
        if self._finish == "now" and not self._ended:
            self._end("finish() was called")
        if self._snapshot_wanted:
            self._snapshot_wanted = False
            self._snapshot = self.ingest.state_dict()
            self._snapshot_ready.set()

    def _hear_handoffs(self, now: bool = False) -> None:
        """Rank 0, once it hears: fail, for the launcher, each simulation another rank
        handed here (`nonfinite_handoff`), at empty polls, pumps and blocked puts (a held
        rank 0 too); at most every `HEAR_EVERY` s unless `now` (before a HELLO)."""
        self.nonfinite_ranks.hear(now)

    def _on_idle(self) -> None:
        idle = self._idle.empty_poll(self.ingest.messages)  # (no cost per message)
        self._hear_handoffs()
        if self.ingest.log.pending:  # the summary of a flood that stopped
            self.ingest.log.tick()
        if self._finish == "wait" and not self._ended and self.ingest.all_finished():
            self._end("finish() was called and every simulation has finished")
        if not self._ended:  # (the study has ended: end, or fail on what this rank lacks)
            self.study_end.check(idle, self.ingest, self._end)
        if not self._ended:
            self._idle.check(idle, self.ingest)

    def _end(self, why: str) -> None:
        self._ended = True
        self.puts_lost = self.puts_lost or bool(self._feeder.overflow)
        self._feeder.overflow.clear()  # nothing more goes into the buffer
        ing = self.ingest
        ing.drop_pending(list(ing.pending))
        ing.log.flush()
        self._buffer.close()
        logger.info(
            "receiver of rank %d: end of stream (%s); %s put, %s, %d rejected",
            self._rank,
            why,
            plural(ing.samples_put, "sample"),
            plural(ing.duplicates, "duplicate"),
            sum(ing.rejected.values()),
        )
        self._twins_due = True
        self._tell_twins()

    def _tell_twins(self, last: bool = False) -> None:
        """The end of the stream's list of the simulations that had a twin
        (`twin_hellos`), once: at the end, unless a suspect still awaits judgment; then
        as soon as none does (after the end the ingester still judges the suspects by
        their first connection's BYE, its close or the grace: `DataPath`), or, `last`,
        as the thread stops, with what was judged and the suspects that were not, named
        as such. Before, it was said at the end: the
        BYE of a twin's second connection, read first, could end the stream while the
        first's was still unread, and the list left that simulation out (two plain
        clients per simulation under srun without --mpi: 1 of 2 doubled simulations
        named, once)."""
        twins = self.ingest.twins
        if not self._twins_due or (twins.pending and not last):
            return
        self._twins_due = False
        line = twins.summary(unjudged=last)
        if line is not None:
            logger.log(twins.summary_level, "%s", line)  # (as its first warning)

    def _flush_log(self) -> None:
        """The last summary of rejections and drops, and the list of twins if still due,
        as the thread stops (a pump that is still running owns the ingest: it is waited
        for, briefly)."""
        if self._lock.acquire(timeout=self._stop_timeout / 2):
            try:
                self.ingest.log.flush()
                self._tell_twins(last=True)
            finally:
                self._lock.release()
