"""`StreamSource`: the network stream as the trainer's `train_source`.

    config = ReceiverConfig(expected_simulations=10, rendezvous_dir="out/rendezvous")
    trainer = OnlineTrainer(model, args, optimizer, train_source=StreamSource(config))

Each training rank gets its own :class:`~melissa_trainer.stream.receiver.Receiver`
(created by `start`, from one `ReceiverConfig`), bound to loopback on a random port
unless `ReceiverConfig.bind` says otherwise; simulations find the endpoints in
`ReceiverConfig.rendezvous_dir` (``MELISSA_TRAINER_RENDEZVOUS``) or are given
`endpoint` of every rank (``MELISSA_TRAINER_ENDPOINTS``).

Simulations started by a `melissa_trainer.Launcher` go through a
:class:`~melissa_trainer.study.study.Study`, which composes this source with the launcher
(it starts, supervises and stops the simulations from rank 0, and fills in
`expected_simulations` and `rendezvous_dir`). Here ("external mode") the user starts the
simulations and says how many to expect; on resume, the dedup drops what the buffer
already has of a simulation that runs again.

No silent hang, no false success: `wait_for` (through `check()`) raises `SourceError`,
so that training stops with the error, when no message arrived for `stall_timeout`
seconds while simulations are expected, and when the stream ended with no finished
simulation. Before that, in external mode, rank 0 says once when training has waited
`FIRST_DATA_NOTICE` s with no sample since its receiver started: the address it listens
on, what has arrived (nothing, or messages but no sample), how the simulations find it
(`no_data_notice`; when: `melissa_trainer.sources.first_data`). Resumed from a
checkpoint, it also names the simulations the checkpoint holds unfinished: a solver still
running follows the restarted trainer by itself (the Python, C and Fortran clients keep a
replay window in external mode); one that ended or failed meanwhile must be run again
with the same id (docs/how-to/own-solver.md, "When the trainer restarts").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from melissa_trainer.buffers import Buffer
from melissa_trainer.sources.first_data import FirstDataWait
from melissa_trainer.sources.ingest_transform import IngestTransform
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream import heap
from melissa_trainer.stream.config_fill import check_order, filled, filled_here, unfilled
from melissa_trainer.stream.final_stop import read_final_stop
from melissa_trainer.stream.ingest_counters import telemetry_keys
from melissa_trainer.stream.no_data_notice import no_data_notice
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning
from melissa_trainer.stream.restart_failed import note_restart_failed
from melissa_trainer.stream.source_config import rank_bind
from melissa_trainer.stream.source_record import StreamSourceRecord
from melissa_trainer.stream.starvation_watch import StarvationWatch, external_watch
from melissa_trainer.stream.stop_record import StopReason
from melissa_trainer.stream.watchdog import SilenceExcuse

logger = logging.getLogger(__name__)


class StreamSource(StreamSourceRecord):
    """Fills each rank's buffer with the samples simulations stream over ZeroMQ.

    Args:
        config: each rank's receiver (`ReceiverConfig`: expected simulations, the
            endpoint to bind, the rendezvous directory, the study's schema, the stall
            timeout, bounds, CURVE keys); default ``ReceiverConfig()`` (a `Study`
            fills in the fields left None that it knows, see `fill_in`). An explicit
            TCP port in `bind` is offset by the rank (``tcp://h:5555`` -> rank r binds
            ``5555 + r``), so that ranks on one host do not clash.
        keep_freed_memory: opt-in, on glibc: let malloc recycle the memory of received
            frames in this process instead of mapping and unmapping it frame by frame
            (see `melissa_trainer.stream.heap`; its figures: docs/measured.md, "Design
            choices, measured"). It
            changes malloc for the whole process, for good: the process then keeps the
            memory of its largest burst. Set at `start`; default False. (The bounded
            form, `ReceiverConfig.recycle_frames`, is on by default.)
        tuning: the receivers' timing (`ReceiverTuning`); the defaults suit training.

    `start` raises `OSError` when a rank cannot bind its endpoint.

    Methods are called from the training thread (`finish`, `telemetry` and
    `finished_simulations` may be called from any thread).
    """

    puts_blocks = True  # its receivers' pumps put `SampleBlock`s

    #: every rank's receiver sees each simulation end: logged once, not summed over ranks
    study_keys = frozenset({"simulations_finished", "simulations_abandoned"})

    def __init__(
        self,
        config: ReceiverConfig | None = None,
        *,
        keep_freed_memory: bool = False,
        tuning: ReceiverTuning | None = None,
    ) -> None:
        self.config = ReceiverConfig() if config is None else config
        self.tuning = tuning
        self._keep_freed_memory = bool(keep_freed_memory)
        self._rank, self._world = 0, 1
        self._receiver: Receiver | None = None
        self._buffer: Buffer | None = None
        self._state: dict[str, Any] | None = None
        self._finish: bool | None = None
        #: rank 0: when to say that training waits for the first data (module
        #: docstring); None: never (a `Study` says its own, `study.first_data`)
        self.first_data: FirstDataWait | None = FirstDataWait()
        self._messages_then = 0  # rank 0's messages when its receiver started
        #: resumed: rank 0's simulations unfinished in the checkpoint, and how many had
        #: finished (for the notice); None: not resumed
        self._resumed: tuple[list[int], int] | None = None
        self._restarts_resume = True  # (`note_restarts_resume`)
        self._transform: IngestTransform | None = None
        self._excuse: SilenceExcuse | None = None
        #: a wait for a batch no sample comes for fails (`starvation_watch`): set by
        #: `start` on several ranks (external mode's words); a `Study` runs its own
        self.starvation: StarvationWatch | None = None
        #: the config's fields that `fill_in` set, with the values it set (`forget_filled`)
        self._filled: dict[str, Any] = {}

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

    def fill_in(
        self,
        *,
        expected_simulations: int | None = None,
        rendezvous_dir: str | Path | None = None,
        run_id: str | None = None,
        parameters: Sequence[str] | None = None,
    ) -> None:
        """Set the fields of `config` that are still None to these values (a value
        given as None changes nothing); before `start`. A `Study` gives its launcher's
        `n_simulations`, its sampler's parameter names and ``{output_dir}/rendezvous``,
        the trainer its `run_id`.

        Raises:
            ValueError: `config.parameters` lists the names `parameters` gives (a study's
                sampler's) in another order: each sample's vector would follow the
                config, a held-out sample built from ``sampler.draw()`` the sampler, and a
                model read one parameter as another (`config_fill.check_order`).
        """
        if self._receiver is not None:
            raise RuntimeError("StreamSource.fill_in() must be called before start()")
        check_order(self.config.parameters, parameters)
        before = self.config
        self.config = filled(
            before,
            expected_simulations=expected_simulations,
            rendezvous_dir=rendezvous_dir,
            run_id=run_id,
            parameters=None if parameters is None else tuple(parameters),
        )
        self._filled.update(filled_here(before, self.config))

    def forget_filled(self, *names: str) -> None:
        """Set back to None the fields `names` of `config` that `fill_in` set (and that
        still hold what it set): what one trainer filled in (its rendezvous, its run id),
        when the source is given to another trainer, which fills in its own. A field
        given in the config is kept. Nothing once started (the receiver's config)."""
        if self._receiver is None:
            self.config = unfilled(self.config, self._filled, names)

    def set_run_id(self, run_id: str) -> None:
        """The trainer's run id: each receiver publishes it and refuses HELLOs of
        another run (unless `config.run_id` was given). It replaces an earlier trainer's
        (a source given to a second trainer before it started: `forget_filled`)."""
        self.forget_filled("run_id")
        self.fill_in(run_id=run_id)

    def set_ingest_transform(self, transform: IngestTransform) -> None:
        """This rank's receiver applies `transform` to each sample (a BATCH's block at
        once) before it puts it, in whichever thread ingests (`Receiver`); before `start`."""
        if self._receiver is not None:
            raise RuntimeError("StreamSource.set_ingest_transform() must be called before start()")
        self._transform = transform

    def excuse_silence(self, excuse: SilenceExcuse | None) -> None:
        """What may explain a silence past `stall_timeout`, before or after `start`:
        given the idle seconds, what the silence waits for in words, or None (a
        stall). A `Study` sets it from its launcher (`melissa_trainer.stream.watchdog`
        has the contract); None (the default, external mode): every silence past
        `stall_timeout` is a stall."""
        self._excuse = excuse
        if self._receiver is not None:
            self._receiver.excuse_silence(excuse)

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        if self._receiver is not None:
            raise RuntimeError("StreamSource.start() was called twice")
        if self._keep_freed_memory:
            heap.keep_freed_memory()
        config = replace(self.config, bind=rank_bind(self.config.bind, rank))
        receiver = Receiver(buffer, rank, world_size, config, self.tuning, self._transform)
        if self._state:
            receiver.load_state_dict(self._state)
        receiver.excuse_silence(self._excuse)
        receiver.restarts_resume = self._restarts_resume
        receiver.start()
        if self._state and rank == 0:
            # (`start` applied the record: read at once, as the checkpoint left it;
            # `unfinished` copies the ledgers the receiver's thread may be adding to)
            ingest = receiver.ingest
            self._resumed = (ingest.unfinished(), ingest.simulations_finished)
        self._receiver, self._buffer = receiver, buffer
        if self._finish is not None:
            receiver.finish(self._finish)
        self._rank, self._world = rank, world_size
        excuse, stall = (lambda: self._excuse), self.config.stall_timeout
        if world_size > 1:  # (one rank holds no other back: its watchdog is enough)
            self.starvation = external_watch(receiver, excuse, buffer, rank, world_size, stall)
        if rank == 0 and self.first_data is not None:
            self.first_data.started(receiver.ingest.samples_put)
            self._messages_then = receiver.ingest.messages

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

    def wait_for(self, n_samples: int, timeout: float) -> None:
        """Ingest, in this thread, what has arrived (see `Receiver.pump`); with
        `timeout` > 0, go on waiting for messages and ingesting them until the buffer
        holds `n_samples` (and its watermark), the stream has ended, or `timeout`
        seconds have passed. Raises `SourceError` as `check` does, when the receiver
        cannot ingest here (ended, failed, or its thread ingesting) or before waiting.
        """
        receiver, buffer = self._receiver, self._buffer
        if receiver is None or buffer is None:
            self.check()
            return
        watch = self.starvation  # (after the wait: `starvation_watch`)
        if timeout <= 0:
            if not receiver.pump():
                self.check()
            if watch is not None:
                watch.check(n_samples, 0.0)
            return
        self.check()
        self._notice_no_data(receiver)
        deadline, wait = time.monotonic() + timeout, timeout
        need = max(n_samples, buffer.watermark)
        while receiver.pump(timeout) and not buffer.closed and len(buffer) < need:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                break
        else:
            self.check()
        if watch is not None:
            watch.check(n_samples, wait)

    def _notice_no_data(self, receiver: Receiver) -> None:
        """Rank 0, while training waits: log `no_data_notice` once it is due."""
        wait = self.first_data
        waited = None if wait is None else wait.due(receiver.ingest.samples_put)
        if waited is not None:
            messages = receiver.ingest.messages - self._messages_then
            notice = no_data_notice(
                waited, receiver.endpoint, self._world, self.config, messages, self._resumed
            )
            logger.warning("%s", notice)

    def check(self) -> None:
        """Raise `SourceError` if the receiver failed (or stalled), or if the stream
        ended with no finished simulation."""
        receiver = self._receiver
        if receiver is None:
            return
        receiver.check()
        ingest = receiver.ingest
        if receiver.ended and ingest.simulations_finished == 0 and ingest.expected != 0:
            raise SourceError(
                f"the stream of rank {self._rank} ended with no finished simulation "
                f"({len(ingest.abandoned)} abandoned): there is nothing to train on"
            )

    def stop(self) -> None:
        if self._receiver is not None:
            self._receiver.stop()

    def note_stop(self, code: str, message: str) -> None:
        if self._receiver is not None:  # (written in its stop record: `stop_record`)
            self._receiver.note_stop(StopReason(code, message))

    def note_restarts_resume(self, resumes: bool) -> None:
        """`Source.note_restarts_resume`: before or after `start`."""
        self._restarts_resume = resumes
        if self._receiver is not None:
            self._receiver.restarts_resume = resumes

    def final_stop(self, output_dir: str) -> str | None:
        """`Source.final_stop`: the records of its rendezvous directory (None: none)."""
        stop = read_final_stop(self.config.rendezvous_dir)
        return None if stop is None else stop.words()

    def note_start_failed(
        self, rank: int, error: BaseException, default_dir: str | Path | None = None
    ) -> None:
        """`Source.note_start_failed`: unless this rank's receiver published (its own stop
        record then says why it stopped), the failed run's record in its rendezvous file
        is made truthful (`restart_failed.note_restart_failed`). `default_dir`: where that
        file is while `config` names no rendezvous (a `Study`'s default, before its
        `configure`); the config is left as it is."""
        receiver = self._receiver
        directory = self.config.rendezvous_dir or default_dir
        if directory is None or (receiver is not None and receiver.endpoint is not None):
            return
        note_restart_failed(directory, rank, error, self._restarts_resume)

    def telemetry(self) -> dict[str, float]:
        if self._receiver is None:
            return dict.fromkeys(telemetry_keys(), 0.0)
        return self._receiver.telemetry()
